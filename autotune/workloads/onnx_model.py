"""``onnx_model.py:onnx_workload``: the function a run calls to build an ONNX cut's workload.

A config's ``workload: {onnx: ...}`` becomes this ``file.py:function`` workload (see
:func:`autotune.workloads.onnx_import.workload_spec`), which its workers load by path; the import
is absolute so that it works from a module loaded by path.
"""

from __future__ import annotations

from autotune.workloads.onnx_import import onnx_workload

__all__ = ["onnx_workload"]
