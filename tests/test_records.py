"""What minrepro records for others to read names no path of the machine it ran on."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from minrepro.catalog.run import write_results
from minrepro.dirs import CHECKOUT, cache_dir, scrubbed, without_local_paths

TMP = tempfile.gettempdir()


def test_local_paths_become_placeholders():
    assert without_local_paths(f"No such file or directory: '{TMP}/minrepro-run-x1/tmp/tmpab/index.json'") == (
        "No such file or directory: '<tmp>/index.json'"
    )
    assert without_local_paths('File "/opt/envs/pinned/lib/python3.11/site-packages/torch/nn/x.py", line 3') == (
        'File "site-packages/torch/nn/x.py", line 3'
    )
    assert without_local_paths(f"Guard: passes under {cache_dir()}/envs/pinned-patched/bin/python") == (
        "Guard: passes under <cache>/envs/pinned-patched/bin/python"
    )
    assert without_local_paths(f"{CHECKOUT}/results/explore/x.min.py") == "./results/explore/x.min.py"
    assert without_local_paths(f"{Path.home()}/envs/pp/bin/python") == "~/envs/pp/bin/python"


def test_names_that_only_look_like_a_path_stay():
    home = str(Path.home())
    text = f"accelerate{home}-entry-disk-offload.diff, /tmp b, patches/accelerate/root-entry-disk-offload.diff"
    assert without_local_paths(text) == text


def test_a_recorded_document_is_scrubbed_keys_and_all(tmp_path):
    document = {
        "python": f"{cache_dir()}/envs/newest/bin/python",
        "cases": [{"headline": f"'{TMP}/a/b/index.json'"}],
        f"{TMP}/key/x": 1,
        "seconds": 1.5,
    }
    assert scrubbed(document) == {
        "python": "<cache>/envs/newest/bin/python",
        "cases": [{"headline": "'<tmp>/index.json'"}],
        "<tmp>/x": 1,
        "seconds": 1.5,
    }
    write_results(tmp_path / "r.json", document)
    assert json.loads((tmp_path / "r.json").read_text()) == scrubbed(document)
