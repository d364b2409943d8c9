"""Build hook: compile qkv's C kernels (qkv/kernels/*/*.c, one library) while the wheel is built.

The compiled library is optional: if no compiler is found or compiling fails, the install still
succeeds and qkv uses the NumPy twins of the kernels (see qkv/kernels/float32/__init__.py).
"""

import importlib.util
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class KernelsBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        path = Path(self.root) / "qkv" / "kernels" / "build.py"
        spec = importlib.util.spec_from_file_location("_qkv_build_kernels", path)
        builder = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(builder)
        lib = builder.build(log=self.app.display_warning)
        if lib is not None and version != "editable":  # an editable install uses it where it is
            build_data["force_include"][str(lib)] = "qkv/kernels/_kernels.so"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
