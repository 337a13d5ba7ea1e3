"""Builds kafkarepl._core from csrc/*.c and kafkarepl/_core.pyx.

Works with `pip install -e .` and `python setup.py build_ext --inplace`. SSE4.2 code is
enabled per function (__attribute__((target("sse4.2")))) and chosen at run time, so no
-msse4.2 here: the module must import on CPUs without it.
"""

from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup

CFLAGS = ["-O2", "-Wall", "-Wextra", "-std=gnu11", "-fno-strict-aliasing"]

core = Extension(
    "kafkarepl._core",
    sources=["kafkarepl/_core.pyx", *sorted(glob("csrc/*.c"))],
    include_dirs=["csrc"],
    depends=sorted(glob("csrc/*.h")),
    extra_compile_args=CFLAGS,
)

setup(
    ext_modules=cythonize(
        [core],
        compiler_directives={"language_level": "3"},
    ),
)
