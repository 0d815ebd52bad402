"""Builds the native batch copier (gload/_copier.c) with the package on Linux; optional: without a C compiler the
package installs without it and the Python hand-off paths serve every stream (gload._native.WHY_NOT says so). The
library has no Python API (ctypes loads it), so the name is only what setuptools gives extensions."""

import sys

from setuptools import Extension, setup

ext = []
if sys.platform.startswith("linux"):
    ext.append(Extension("gload._copier", sources=["gload/_copier.c"], libraries=["dl", "pthread"],
                         extra_compile_args=["-O3", "-fvisibility=hidden"], optional=True))
setup(ext_modules=ext)
