from atlas_bridge.cli import main

main()
