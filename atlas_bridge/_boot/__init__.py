"""Start-up files for the automatic Spark hook (:mod:`atlas_bridge.spark.auto`): the ``.pth`` line that
setup.py copies into site-packages, and the ``sitecustomize`` directory ``atlas-bridge instrument`` puts
on ``PYTHONPATH``. Nothing here is imported by the library itself."""
