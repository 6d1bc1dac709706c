"""The catalog run live in this interpreter's environment (needs the libraries; CUDA cases need a GPU).

`nox -s minrepro` is the main check of the catalog; these tests let a developer with the libraries
installed run one case through pytest, and check the harness's judgement agrees with the manifest."""

from __future__ import annotations

import pytest

from minrepro.catalog.manifest import load_catalog
from minrepro.harness.probe import probe
from minrepro.catalog.run import CaseRuns, run_cases

CATALOG = load_catalog()


def _run(case):
    env = probe(None)
    set_name = CATALOG.detect_set(env.versions)
    if set_name is None and not case.fixed_in:
        pytest.skip("installed versions match no version set and the case has no fixed_in")
    return run_cases([case], env, set_name, CaseRuns(timeout=300))[0]


@pytest.mark.libs
@pytest.mark.catalog
@pytest.mark.parametrize("case", [c for c in CATALOG.cases if c.device == "cpu"], ids=lambda c: c.id)
def test_cpu_case_is_as_declared(case):
    result = _run(case)
    assert result.verdict in ("as declared", "skipped"), result


@pytest.mark.libs
@pytest.mark.catalog
@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CATALOG.cases if c.device == "cuda"], ids=lambda c: c.id)
def test_cuda_case_is_as_declared(case):
    result = _run(case)
    assert result.verdict == "as declared", result
