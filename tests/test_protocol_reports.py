"""Risk and utility in the reports of protocol runs: `fedanon simulate` (input and output) and
`fedanon run` (output only: the pooled input exists nowhere), over real daemons (gRPC, mutual TLS).

Figures are checked against the plain-Python reference in `risk_reference.py`, computed both from
the written result file and from the raw input generalized by reading the hierarchy files.
"""

from __future__ import annotations

import json
import shutil

import pytest
import tomli_w

from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, read_table_csv
from fedanon.parties.config import run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

from risk_reference import assert_matches, generalize_and_suppress, reference_risk

from datasets import ADULT_DIR
QIS = ["age", "sex", "race", "education"]
HIER = {q: ADULT_DIR / f"adult_hierarchy_{q}.csv" for q in QIS}
QI_FLAGS = [a for q in QIS for a in ("--qi", f"{q}={HIER[q]}")]
K = 5
ROWS = 1500


@pytest.fixture(scope="module")
def adult_part(tmp_path_factory):
    """The first ROWS rows of ADULT with the QIs and salary-class (released unchanged)."""
    header, rows = read_table_csv(ADULT_DIR / "adult.csv")
    keep = QIS + ["salary-class"]
    idx = [header.index(c) for c in keep]
    rows = [[r[i] for i in idx] for r in rows[:ROWS]]
    path = tmp_path_factory.mktemp("adult_part") / "part.csv"
    path.write_text(";".join(keep) + "\n" + "".join(";".join(r) + "\n" for r in rows))
    return path, keep, rows


def reference_release(keep, rows, transformation):
    return generalize_and_suppress(keep, rows, QIS, HIER, transformation, K)


@pytest.mark.slow
def test_simulate_reports_input_and_output_risk_and_utility(adult_part, tmp_path, capsys):
    path, keep, rows = adult_part
    out, rep, page = tmp_path / "out.csv", tmp_path / "report.json", tmp_path / "report.html"
    code = main(["simulate", str(path), "--parties", "2", *QI_FLAGS, "--insensitive", "salary-class",
                 "--k", str(K), "--suppression", "0.05", "--output", str(out), "--report", str(rep),
                 "--html", str(page), "-q"])
    assert code == 0, capsys.readouterr().err
    report = json.loads(rep.read_text())
    oh, orows = read_table_csv(out)
    # input risk: the pooled input as dealt to the parties
    assert_matches(report["risk"]["input"], reference_risk(keep, rows, QIS))
    assert report["risk"]["input"]["satisfies"]["k"] == 1
    # output risk: the file the protocol delivered, and the raw input generalized by the hierarchy files
    ours = report["risk"]["output"]
    assert_matches(ours, reference_risk(oh, orows, QIS))
    assert_matches(ours, reference_risk(keep, reference_release(keep, rows, report["transformation"]), QIS))
    assert ours["satisfies"]["k"] >= K and ours["classes"] == report["classes"]
    assert ours["suppressed_rows"] == report["suppressed_rows"]
    # utility: the protocol's own loss equals the metric evaluated centrally at its transformation
    metric = report["metric"]
    assert report["utility"]["metrics"][metric]["output"] == pytest.approx(report["information_loss"], rel=1e-9)
    assert 0 < report["utility"]["metrics"][metric]["relative_percent"] < 100
    levels = {a["attribute"]: a["level"] for a in report["utility"]["attributes"]}
    assert levels == report["transformation"]
    for a in report["utility"]["attributes"]:  # distinct released values, counted in the file
        released = {r[oh.index(a["attribute"])] for r in orows if not all(r[oh.index(q)] == "*" for q in QIS)}
        assert a["distinct_output"] == len(released), a
    assert sum(n for _, n in report["distributions"]["age"]["input"]) == ROWS
    text = page.read_text()
    assert report["html"] == str(page) and 'id="risk"' in text and 'id="metrics"' in text
    assert text.count("<svg") == 2 + len(QIS)  # class sizes, risk profile, one per QI


@pytest.fixture(scope="module")
def network(adult_part, tmp_path_factory):
    path, keep, rows = adult_part
    folder = tmp_path_factory.mktemp("run_shares")
    parties = []
    for i, name in enumerate(("p1", "p2")):
        share = folder / f"{name}.csv"
        share.write_text(";".join(keep) + "\n" + "".join(";".join(r) + "\n" for r in rows[i::2]))
        parties.append(SimulatedParty(name, "primary", csv_path=share, qi_hierarchies=dict(HIER),
                                      insensitive=["salary-class"]))
    parties.append(SimulatedParty("helper", "helper"))
    with SimulatedNetwork(parties) as net:
        yield net


@pytest.mark.slow
def test_run_reports_output_risk_and_says_input_risk_is_unavailable(adult_part, network, tmp_path, capsys):
    path, keep, rows = adult_part
    cfg = network.run_config("B", config=AnonymizationConfig(list(QIS), k=K, suppression=0.05))
    cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
    run_toml = tmp_path / "run.toml"
    run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    page = tmp_path / "run.html"
    assert main(["run", "--config", str(run_toml), "--no-progress", "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "risk (output)" in printed and max(len(line) for line in printed.splitlines()) <= 80
    report = json.loads(cfg.report.read_text())
    oh, orows = read_table_csv(cfg.output)
    ours = report["risk"]["output"]
    assert_matches(ours, reference_risk(oh, orows, QIS))
    assert_matches(ours, reference_risk(keep, reference_release(keep, rows, report["transformation"]), QIS))
    assert ours["satisfies"]["k"] >= K and ours["suppressed_rows"] == report["suppressed_rows"]
    # nothing of the pooled input: its risk is not available, with the reason
    assert report["risk"]["input"] is None and "pooled input" in report["risk"]["input_unavailable"]
    assert report["utility"]["metrics"] is None and "pooled input" in report["utility"]["unavailable"]
    assert {a["attribute"]: a["level"] for a in report["utility"]["attributes"]} == report["transformation"]
    for q, d in report["distributions"].items():
        assert d["input"] is None
        written = {r[oh.index(q)] for r in orows}
        assert {label for label, _ in d["output"]} <= written | {"(other)"}
        assert sum(n for _, n in d["output"]) == len(orows)
    # the page: output only, says why there is no input column, one plot per QI + class sizes + risk profile
    text = page.read_text(encoding="utf-8")
    assert report["html"] == str(page) and "Input figures not available" in text
    assert "<th>input</th>" not in text and f"<td>{ours['classes']}</td>" in text
    assert text.count("<svg") == 2 + len(QIS) and "<script" not in text
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        from test_html_report import browse  # the same headless-Chromium check as the anonymize page

        dom = browse(page, "--dump-dom", tmp=tmp_path)
        assert dom.returncode == 0 and dom.stdout.count("<svg") == 2 + len(QIS), dom.stderr[-2000:]
        assert not [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.slow
def test_run_writes_its_result_even_if_the_risk_figures_fail(network, tmp_path, capsys, monkeypatch):
    import fedanon.report.analysis as analysis

    def broken(*args, **kwargs):
        raise ValueError("injected failure")

    monkeypatch.setattr(analysis, "analyze_protocol_output", broken)
    cfg = network.run_config("B", config=AnonymizationConfig(list(QIS), k=K, suppression=0.05))
    cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
    run_toml = tmp_path / "run.toml"
    run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    assert main(["run", "--config", str(run_toml), "--no-progress", "--html", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "without risk figures (ValueError: injected failure)" in err and "no HTML report" in err
    report = json.loads(cfg.report.read_text())
    assert report["risk"]["output"] is None and "injected failure" in report["risk"]["unavailable"]
    assert len(read_table_csv(cfg.output)[1]) == ROWS and report["transformation"]
