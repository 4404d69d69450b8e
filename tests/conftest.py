from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "profiles"


@pytest.fixture
def write(tmp_path: Path):
    """Write a file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write


MINIMAL = """\
model:
  path: /nonexistent/model
  architecture: glm-5.2
  quantization: exl3
  bits_per_weight: 3.42
hardware:
  gpu: rtx-pro-6000
  count: 4
parallel:
  tensor: 4
  decode_context: 4
speculative:
  method: mtp
  tokens: 3
serving:
  max_model_len: 131072
  kv_cache_dtype: nvfp4_ds_mla
vllm:
  attention_backend: B12X_MLA_SPARSE
"""
