"""Builds the package two ways.

- From a checkout (``pip install ./pyclient``, development): the native batch copier (gload/_copier.c) is compiled as
  an optional extension on Linux; without a C compiler the package installs without it and the Python hand-off
  paths serve every stream (gload._native.WHY_NOT says so). The ``gload`` binary is not included: the ``gload``
  command and Loader's auto-started server use $GLOAD_BIN, the checkout's bin/gload (``make build``) or a ``gload``
  on PATH.
- The release wheel (``make wheel``, scripts/wheel/build.py): with GLOAD_WHEEL_PLAT set to the manylinux tag that
  build.py read off the binaries, nothing is compiled here; the staged package already holds gload/_copier.so
  (scripts/build-copier.sh) and gload/_bin/gload (``make build``), and the wheel is tagged py3-none-<that tag>: the
  copier has no Python API (ctypes loads it) and the binary none at all, so one wheel serves every Python 3.

The copier's name is only what setuptools gives extensions; _native loads any gload/_copier*.so.
"""

import os
import sys

from setuptools import Extension, setup

plat = os.environ.get("GLOAD_WHEEL_PLAT", "")
if plat:
    from setuptools.command.bdist_wheel import bdist_wheel

    class BinaryWheel(bdist_wheel):
        """A platform wheel without Python-version-specific code: py3-none-<plat>."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", plat

    for f in ("gload/_copier.so", "gload/_bin/gload"):
        if not os.path.isfile(f):
            sys.exit(f"setup.py: GLOAD_WHEEL_PLAT is set but {f} is missing: build the wheel with `make wheel`")
    from setuptools.dist import Distribution

    class BinaryDistribution(Distribution):
        """Installs into platlib, as a wheel with compiled code must."""

        def has_ext_modules(self):
            return True

    setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": BinaryWheel})
else:
    ext = []
    if sys.platform.startswith("linux"):
        ext.append(Extension("gload._copier", sources=["gload/_copier.c"], libraries=["dl", "pthread"],
                             extra_compile_args=["-O3", "-fvisibility=hidden"], optional=True))
    setup(ext_modules=ext)
