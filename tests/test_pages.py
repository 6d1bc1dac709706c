"""The pages generated from the catalog and results/ (a page per family, docs/catalog.md's blocks, docs/main.md) are
committed exactly as `minrepro docs` renders them, and the family manifest is checked like the case manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from minrepro.catalog.manifest import CASES_DIR, Family, load_catalog
from minrepro.catalog.pages import family_slug, render_docs, stale_pages, upstream_link, write_docs
from minrepro.cli import main
from minrepro.errors import MinreproError

ROOT = Path(__file__).resolve().parent.parent
CATALOG = load_catalog()


def test_committed_pages_are_what_minrepro_docs_renders(capsys):
    # fails when a family page, docs/catalog.md or docs/main.md was edited by hand or not regenerated
    code = main(["docs", "--results", str(ROOT / "results"), "--docs", str(ROOT / "docs"), "--check"])
    assert code == 0, capsys.readouterr().err


def test_every_family_has_a_page_with_its_cases_and_its_text():
    pages = render_docs(CATALOG, ROOT / "results", ROOT / "docs")
    for fid, family in CATALOG.families.items():
        page = pages[ROOT / "docs" / "families" / f"{family_slug(family)}.md"]
        assert page.startswith(f"# Family {fid} (`{family.slug}`): {family.title}\n")
        assert family.summary in page
        for case in (c for c in CATALOG.cases if c.family == fid):
            assert f"## {case.id}\n" in page and f"minrepro run {case.id}" in page
    index = pages[ROOT / "docs" / "catalog.md"]
    assert "| A' | [quant-state-meta-copy](families/quant-state-meta-copy.md): " in index


def _docs_copy(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "docs" / "catalog.md", docs / "catalog.md")
    return docs


def test_docs_writes_the_pages_and_check_names_a_stale_or_orphan_one(tmp_path, capsys):
    docs = _docs_copy(tmp_path)
    assert main(["docs", "--results", str(ROOT / "results"), "--docs", str(docs)]) == 0
    capsys.readouterr()
    assert stale_pages(CATALOG, ROOT / "results", docs) == []
    page = docs / "families" / "params4bit-hf-initialized.md"
    page.write_text(page.read_text() + "edited by hand\n")
    orphan = docs / "families" / "gone.md"
    orphan.write_text("# a family no longer in the manifest\n")
    assert main(["docs", "--results", str(ROOT / "results"), "--docs", str(docs), "--check"]) == 2
    err = capsys.readouterr().err
    assert "params4bit-hf-initialized.md" in err and "gone.md" in err and len(err.strip().splitlines()) == 1
    write_docs(CATALOG, ROOT / "results", docs)
    assert not orphan.exists() and stale_pages(CATALOG, ROOT / "results", docs) == []


def test_pages_name_no_path_of_the_machine():
    pages = render_docs(CATALOG, ROOT / "results", ROOT / "docs")
    for path, text in pages.items():
        for local in ("/root/", "/home/", "/tmp/", "/work/", str(ROOT)):
            assert local not in text, f"{path.name} names {local}"


def _catalog_with_families(tmp_path: Path, families: str) -> Path:
    cases = shutil.copytree(CASES_DIR, tmp_path / "cases")
    (cases / "families.toml").write_text(families, encoding="utf-8")
    return cases / "catalog.toml"


def test_a_family_without_an_entry_or_an_entry_without_a_family_is_one_line(tmp_path):
    text = (CASES_DIR / "families.toml").read_text(encoding="utf-8")
    missing = text.replace('[family."B"]', '[family."NOPE"]')
    with pytest.raises(MinreproError, match=r"no case of family NOPE; no entry for family B$"):
        load_catalog(_catalog_with_families(tmp_path, missing))


def test_a_family_entry_needs_a_title_and_a_summary(tmp_path):
    text = (CASES_DIR / "families.toml").read_text(encoding="utf-8")
    start = text.index('[family."B"]')
    broken = (
        text[:start]
        + '[family."B"]\ntitle = ""\nsummary = "x"\ncolour = "red"\n'
        + text[text.index("[family.", start + 1) :]
    )
    with pytest.raises(MinreproError, match=r"family B: unknown or empty field\(s\) colour, title"):
        load_catalog(_catalog_with_families(tmp_path, broken))


def test_family_slugs_and_upstream_links():
    assert [f.slug for f in CATALOG.families.values()][:2] == ["params4bit-hf-initialized", "quant-state-meta-item"]
    assert family_slug(Family("A'", "t", "s")) == "a-prime" and family_slug(Family("AB", "t", "s", slug="x")) == "x"
    assert (
        upstream_link("huggingface/peft#3169")
        == "[huggingface/peft#3169](https://github.com/huggingface/peft/issues/3169)"
    )
    assert upstream_link("not a reference") == "not a reference"
