"""Only here to ship ``atlas_bridge_spark_hook.pth`` (everything else is in setup.cfg).

A ``.pth`` file must sit at the top of site-packages, outside any package, which setup.cfg cannot express;
``build_py`` copies it there for wheels, plain installs and editable installs alike.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "atlas_bridge_spark_hook.pth"


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        src = Path(__file__).resolve().parent / "atlas_bridge" / "_boot" / PTH
        self.copy_file(str(src), str(Path(self.build_lib) / PTH), preserve_mode=0)
        if getattr(self, "editable_mode", False):
            # PEP 660: only what lands in the unpacked wheel (install_lib) is installed.
            target = Path(self.get_finalized_command("install").install_lib) / PTH
            self.copy_file(str(src), str(target), preserve_mode=0)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
