"""Slimming a bitsandbytes wheel keeps the CPU library and the chosen CUDA library, with a valid RECORD."""

from __future__ import annotations

import base64
import hashlib
import zipfile

from minrepro.envs.wheelhouse import slim_wheel


def test_slim_wheel_keeps_only_requested_libraries(tmp_path):
    wheel = tmp_path / "bitsandbytes-0.49.2-py3-none-manylinux_2_24_x86_64.whl"
    files = {f"bitsandbytes/libbitsandbytes_{v}.so": v.encode() * 100 for v in ("cpu", "cuda118", "cuda130", "rocm62")}
    files["bitsandbytes/__init__.py"] = b"x = 1\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("bitsandbytes-0.49.2.dist-info/RECORD", "stale\n")
    slim_wheel(wheel, ["130"])
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = zf.read("bitsandbytes-0.49.2.dist-info/RECORD").decode().splitlines()
        kept = {n: zf.read(n) for n in names if not n.endswith("RECORD")}
    assert {n.rsplit("/", 1)[1] for n in kept} == {
        "libbitsandbytes_cpu.so",
        "libbitsandbytes_cuda130.so",
        "__init__.py",
    }
    for line in record[:-1]:
        name, digest, size = line.split(",")
        data = kept[name]
        assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert int(size) == len(data)
    assert record[-1] == "bitsandbytes-0.49.2.dist-info/RECORD,,"


def test_direct_only_build_downloads_unpinned_extras_and_skips_what_the_target_has(tmp_path, monkeypatch):
    from minrepro.envs import wheelhouse

    downloaded: list[tuple[str, str]] = []
    monkeypatch.setattr(wheelhouse, "resolve", lambda reqs, target: [("nox", "1.0")])  # only TOOLING is resolved
    monkeypatch.setattr(wheelhouse, "download", lambda pins, dest, target: downloaded.extend(pins))
    wheelhouse.build(
        tmp_path,
        ["pinned"],
        wheelhouse.TargetMachine("3.12", ["manylinux2014_x86_64"], ["130"], provided=["SciPy"]),
        closure=False,
        extra=["datasets", "scipy", "dill==0.4.1"],
    )
    assert ("datasets", "") in downloaded and ("dill", "0.4.1") in downloaded
    assert not any(name == "scipy" for name, _ in downloaded)
    assert ("transformers", "5.6.2") in downloaded  # the set's own pins stay


def test_the_default_wheelhouse_holds_every_set_nox_runs(tmp_path, monkeypatch):
    # `nox -s minrepro` runs every set of the manifest; a wheelhouse of pinned and newest alone failed the reporter
    # session on an offline GPU box ("No matching distribution found for accelerate==1.14.0")
    from minrepro.catalog.manifest import load_catalog
    from minrepro.envs import wheelhouse

    asked: list[str] = []
    monkeypatch.setattr(wheelhouse, "build", lambda dest, sets, *rest: asked.extend(sets) or [])
    wheelhouse.main(["--dest", str(tmp_path), "--direct-only"])
    assert asked == list(load_catalog().sets) and "reporter" in asked
