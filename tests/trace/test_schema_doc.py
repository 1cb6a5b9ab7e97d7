from hermes.trace.schema import COLUMNS, EVENT_KINDS, LANE_KINDS, METADATA_KEYS, UNITS
from tests.conftest import REPO


def test_trace_format_doc_covers_the_schema():
    doc = (REPO / "docs" / "trace-format.md").read_text()
    for c in COLUMNS:
        assert f"| `{c.name}` |" in doc, c.name
    for vocab in (EVENT_KINDS, LANE_KINDS, UNITS, METADATA_KEYS):
        for k in vocab:
            assert f"`{k}`" in doc, k
