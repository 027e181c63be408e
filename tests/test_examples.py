"""The scripts in examples/ and the example notebook run against this checkout.

Each script must exit 0 and print what its docstring promises (the optimum, the risk figures), so an
API change that breaks an example fails here, not at a reader's desk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

EXPECTED = {
    "local_anonymize.py": ["transformation: {'age': 1, 'sex': 0, 'zipcode': 3}", "suppressed rows: 2 of 8"],
    "frame_anonymize.py": ["transformation:", "dropped columns: marital-status, native-country, workclass"],
    "risk_check.py": ["1206 sample uniques", "k = 5"],
}


def test_every_example_script_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_script_runs(name: str, tmp_path: Path) -> None:
    if name == "frame_anonymize.py":
        pytest.importorskip("pandas", reason="the frame extra (pandas) is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in EXPECTED[name]:
        assert text in proc.stdout, (text, proc.stdout[-2000:])


def test_notebook_runs(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the test extra")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the test extra")
    pytest.importorskip("ipykernel", reason="ipykernel is in the test extra")
    pytest.importorskip("pandas", reason="the notebook uses pandas (frame extra)")
    notebook = nbformat.read(EXAMPLES / "python_api.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the notebook without outputs, so that what the suite checks is what it ran"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)  # the kernel is a child process: it imports this checkout
    try:
        nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    last = notebook.cells[-1].outputs[0]["data"]["text/plain"]
    assert "'sample uniques before': 8" in last and "'after': 0" in last, last
