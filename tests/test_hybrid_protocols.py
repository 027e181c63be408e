"""What Protocols A, B and C share on hybrid layouts: each equals the engine on the joined ADULT
table over daemons with TLS, and each stops a run where one person is at two row-parties.

The joined table is what a trusted party would anonymize: the pooled rows of the persons every
column group holds (persons missing from a group are dropped, see docs/protocols/hybrid.md).
Each protocol's own behaviour is in tests/test_hybrid_protocol_{a,b,c}.py."""

from __future__ import annotations

import pytest

from fedanon.consortium.simulation import simulate_table
from hybrid_cases import (OPTIONS, adult_config, adult_layout, example_case, example_k_config, full_adult,
                          hybrid_differences, run_hybrid)

#: The models' config per protocol: (suppression, metric of the recursive-l runs).
TLS_CONFIG = {"A": (0.0, "loss"), "B": (0.02, "nonuniform-entropy"), "C": (0.0, "loss")}

#: Which party's report carries the transformation: A's master and C's key holder are the
#: recipient (the layout's first party), B's helper anonymizes.
HOLDER = {"A": "recipient", "B": "helper", "C": "recipient"}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["A", "B", "C"])
@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_over_daemons_with_tls_equals_the_joined_table(layout_name: str, model: str, protocol: str) -> None:
    columns, rows, hierarchies, paths = full_adult()
    layout = adult_layout(layout_name)
    suppression, l_metric = TLS_CONFIG[protocol]
    config = adult_config(model, suppression, "loss" if model == "k" else l_metric)
    sim = simulate_table(columns, rows, paths, config, "hybrid", 0, transport="grpc", layout=layout,
                         protocol=protocol, options=OPTIONS[protocol])
    helpers = 0 if protocol == "A" else 1  # A has no helper
    assert sim.report["simulation"]["daemons"] == len(layout.parties) + helpers
    if HOLDER[protocol] == "helper":
        holder = next(r for r in sim.party_reports.values() if r.get("role") == "helper")
        assert holder["integration"]["rows"] == len(layout.joined_rows(len(rows))) == len(sim.rows)
    else:
        holder = sim.party_reports[layout.names[0]]
    assert hybrid_differences(layout, columns, rows, hierarchies, config, holder.get("transformation"),
                              sim.columns, sim.rows) == []


#: What each party says when clinic2 also claims clinic1's person '1'. A's master sees n-fold
#: encrypted shares, not who sent them, so it names the columns; in B the holders decrypt the
#: flagged token into their own value, the others name the group only.
GROUP = "an identifier occurs twice in the column group of ['clinic1', 'clinic2']"
TWICE = {
    "A": dict.fromkeys(["clinic1", "clinic2", "registry"],
                       "an identifier occurs twice in the column group of columns ['age', 'sex']"),
    "B": {"clinic1": "identifier '1' is claimed twice in one column group",
          "clinic2": "identifier '1' is claimed twice in one column group", "registry": GROUP, "helper": GROUP},
    "C": dict.fromkeys(["clinic1", "clinic2", "registry", "helper"], GROUP),
}


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_a_person_at_two_row_parties_stops_the_run(protocol: str) -> None:
    columns, rows, hierarchies, layout = example_case()

    def claim_twice(local) -> None:  # clinic2 also holds clinic1's first person (pid 1)
        local["clinic2"].rows.append(["1"] + local["clinic1"].rows[0][1:])

    run = run_hybrid(protocol, layout, columns, rows, hierarchies, example_k_config(), local_edit=claim_twice,
                     options=OPTIONS[protocol])
    assert set(run.errors) == set(TWICE[protocol]), run.errors
    for party, expected in TWICE[protocol].items():
        text = str(run.errors[party])
        assert expected in text, (party, text)
        if party in ("registry", "helper"):
            assert "'1'" not in text, (party, text)  # only the parties holding it name the identifier
