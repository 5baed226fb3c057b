"""The ``lmms_eval.models`` entry point: lmms-eval's registry finds ``--model videvolve`` here (no fork needed).

Kept apart from the model class so that lmms-eval can list its models without importing videvolve's harness code.
"""

from __future__ import annotations

from typing import Any


def manifest() -> Any:
    """lmms-eval's ``ModelManifest`` for ``videvolve`` (a simple model: one answer per document)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return ModelManifest(model_id="videvolve", simple_class_path="videvolve.serving.lmms_eval_model.VidevolveLMM")
