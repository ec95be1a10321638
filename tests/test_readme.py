"""The README's Python blocks run, in order, as one program (a reader can paste them).

They run in a subprocess with 8 forced CPU devices, which the "Several devices" block needs
(XLA_FLAGS must be set before JAX starts, as in tests/sharding_cases.py).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAG = "--xla_force_host_platform_device_count=8"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


#: the optional extras a README block may need; a block that imports one that is not installed
#: is left out (the other blocks must not depend on it)
OPTIONAL = ("flax", "equinox", "qwix", "matplotlib")


def _needs_missing_extra(block: str) -> bool:
    mods = re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", block, re.M)
    return any(m in OPTIONAL and importlib.util.find_spec(m) is None for m in mods)


def test_readme_blocks_run(tmp_path):
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 4, "the README's Python blocks were not found"
    blocks = [b for b in blocks if not _needs_missing_extra(b)]
    program = "\n".join(f"# ---- block {i}\n{b}" for i, b in enumerate(blocks))
    program += "\nprint('README blocks ran:', d.shape, d.dtype)\n"
    script = tmp_path / "readme_blocks.py"
    script.write_text(program)
    env = dict(os.environ)
    env["XLA_FLAGS"] = (re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", ""))
                        + " " + FLAG).strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "README blocks ran: (16, 16) float32" in proc.stdout
