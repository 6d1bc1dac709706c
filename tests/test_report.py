"""Issue drafts: every catalog case gets one for a real repository, in that repository's template order,
with the script, no handles, and no internal family labels."""

from __future__ import annotations

from pathlib import Path

from minrepro.catalog.manifest import load_catalog
from minrepro.reports.report import REPOSITORIES, TEMPLATES, draft, render_markdown

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_every_case_drafts_to_its_repository_template():
    catalog = load_catalog()
    for case in catalog.cases:
        report = draft(case, catalog, RESULTS, python=Path("/nonexistent/python"))
        text = render_markdown(report)
        assert report["repository"] in REPOSITORIES.values()
        library = report["repository"].split("/")[1]
        positions = [text.index(f"### {section}") for section in TEMPLATES[library]]
        assert positions == sorted(positions), case.id
        assert case.script.read_text().strip().splitlines()[-1] in text
        assert "Family " not in report["title"] and "@" not in report["sections"].get("Who can help?", "")
        assert "issues/new" in text and "only drafts" in text
