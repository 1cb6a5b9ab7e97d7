"""``opvec`` (operator costs over all signatures at once) gives ``opcost.one_cost``'s numbers,
bit for bit: random signatures of every family, odd inputs, and every shared trace's operators."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.computation import opcost, opvec

TYPES = ["float", "c10::BFloat16", "c10::Half", "double", "long int", "int", "bool", "Scalar",
         "ScalarList", "", "TensorList", "c10::Float8_e4m3fn", "unsigned char"]
NAMES = (sorted(opcost.GEMM_OPS) + sorted(opcost.ELEMENTWISE) + sorted(opcost.REDUCTIONS)
         + sorted(opcost.NORMS) + sorted(opcost.SOFTMAX) + sorted(opcost.COPIES)
         + sorted(opcost.EMBEDDING) + ["convolution", "convolution_backward",
                                       "scaled_dot_product_attention", "mystery_op"])
CONCRETE = ["", "", "", "[-1]", "1", "[0, 1]", "15", "False", "true", "2.5", "[1, 2"]


def _shape(rng: random.Random) -> list[int]:
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 9])
    return [rng.choice([0, 1, 1, 2, 3, 7, 64, 4096, 2 ** 40]) for _ in range(rank)]


def _sig(rng: random.Random) -> tuple[str, str, str, str]:
    name = "aten::" + rng.choice(NAMES) + rng.choice(["", "", ".Tensor"])
    n = rng.choice([0, 1, 2, 2, 3, 3, 4, 5, 10])
    base = _shape(rng)
    dims: list = []
    for _ in range(n):  # broadcast-compatible often, not always
        r = rng.random()
        dims.append(base if r < 0.4 else base[rng.randint(0, len(base)):] if r < 0.6
                    else [] if r < 0.7 else [[2, 3], [4]] if r < 0.72 else _shape(rng))
    types = [rng.choice(TYPES) for _ in range(n + rng.choice([-1, 0, 0, 0, 1]))]
    conc = [rng.choice(CONCRETE) for _ in range(rng.choice([0, 2, n]))]
    raw = [json.dumps(dims), json.dumps(types), json.dumps(conc)]
    for i in range(3):  # absent / odd spellings now and then
        r = rng.random()
        raw[i] = "" if r < 0.05 else raw[i].replace(", ", ",") if r < 0.2 else \
            "[[1, -2]]" if r < 0.21 else "[[01, 2]]" if r < 0.22 else raw[i]
    return name, raw[0], raw[1], raw[2]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


@pytest.mark.parametrize("seed", range(4))
def test_random_signatures_match_one_cost(seed: int) -> None:
    rng = random.Random(seed)
    sigs = [_sig(rng) for _ in range(3000)]
    want = np.array([opcost.one_cost(*s)[:3] for s in sigs], np.float64)
    cols = [np.array(c, dtype=object) for c in zip(*sigs, strict=True)]
    got = opvec.costs(*cols).to_numpy(np.float64)
    bad = [(sigs[i], want[i], got[i]) for i in range(len(sigs))
           if not _same(want[i], got[i])]
    assert not bad, bad[:3]
    # the test exercises the vectorized path, not only the fallback
    fam = np.array([(f[0] if (f := opcost.family_of(s[0])) else "") for s in sigs])
    assert (~np.isnan(want[:, 0]) & np.isin(fam, opvec.VECTOR_FAMILIES)).sum() > 500


def test_hand_numbers() -> None:
    names = np.array(["aten::mm", "aten::add", "aten::add_", "aten::sum", "aten::copy_"], object)
    dims = np.array(["[[64, 128], [128, 32]]", "[[8, 1, 4], [5, 1]]", "[[8, 4], [4]]",
                     "[[10, 3]]", "[[6], [6]]"], object)
    types = np.array(['["c10::BFloat16", "c10::BFloat16"]', '["float", "float"]',
                      '["float", "float"]', '["double"]', '["float", "c10::Half"]'], object)
    conc = np.array(['["", ""]'] * 5, object)
    got = opvec.costs(names, dims, types, conc)
    # mm: 2 M N K; bytes (64x128 + 128x32 + 64x32) x 2
    assert got.loc[0, "flops"] == 2.0 * 64 * 32 * 128
    assert got.loc[0, "bytes"] == (64 * 128 + 128 * 32 + 64 * 32) * 2.0
    # add broadcast (8,1,4)+(5,1) -> (8,5,4): 160 outputs, reads 32 + 5 floats, writes 160
    assert (got.loc[1, "flops"], got.loc[1, "bytes"]) == (160.0, (32 + 5 + 160) * 4.0)
    # in-place add_: written into the first input (32 elements)
    assert (got.loc[2, "flops"], got.loc[2, "bytes"]) == (32.0, (32 + 4 + 32) * 4.0)
    # sum without dims: 30 reads, one output
    assert (got.loc[3, "flops"], got.loc[3, "bytes"]) == (30.0, 30 * 8.0 + 8.0)
    # copy_ half -> float: read 6 x 2, write 6 x 4
    assert (got.loc[4, "flops"], got.loc[4, "bytes"]) == (0.0, 12.0 + 24.0)
    assert got["elem"].tolist() == [2.0, 4.0, 4.0, 8.0, 4.0]


@pytest.mark.parametrize("name", ["aten::mm", "aten::addmm", "aten::linear", "aten::add",
                                  "aten::layer_norm", "aten::copy_"])
def test_few_inputs_alone(name: str) -> None:
    """A batch whose signatures all have one input (or none): narrow arrays."""
    for dims in ("[[4, 4]]", "[]", ""):
        cols = [np.array([x], dtype=object) for x in (name, dims, '["float"]', "")]
        got = opvec.costs(*cols).to_numpy(np.float64)[0]
        want = np.array(opcost.one_cost(name, dims, '["float"]', "")[:3])
        assert _same(got, want), (dims, got, want)


def test_op_costs_matches_on_rows() -> None:
    args = pd.Series([json.dumps({"Input Dims": [[64, 128], [128, 32]],
                                  "Input type": ["float", "float"], "External id": i})
                      for i in (1, 2)] + [json.dumps({"External id": 3}), None,
                                          '{"Input Dims": [[3, 4]], "Input type": ["float"], '
                                          '"Concrete Inputs": ["", "[1]"]}'],
                     index=[10, 11, 12, 13, 14])
    names = pd.Series(["aten::mm", "aten::mm", "aten::relu", "aten::mm", "aten::sum"],
                      index=args.index)
    pd.testing.assert_frame_equal(opvec.op_costs(names, args), opcost.op_costs(names, args))
    # a loaded trace's Arrow-backed args (base_frame(text_args=True)) read straight: same
    for dtype in ("string[pyarrow]", pd.StringDtype("pyarrow", na_value=np.nan)):
        text = args.astype(dtype)
        assert opvec.arrow_text(text)
        pd.testing.assert_frame_equal(opvec.op_costs(names, text),
                                      opcost.op_costs(names, args))
    assert not opvec.arrow_text(args.astype(object))
    pd.testing.assert_frame_equal(opvec.op_costs(names, args.astype(object)),
                                  opcost.op_costs(names, args))


def test_base_frame_keeps_text_args() -> None:
    from hermes.analyzers.common.opinfo import base_frame

    ev = pd.DataFrame({"name": pd.Categorical(["a", "b", "c"]), "ts_ns": [0, 5, 9],
                       "dur_ns": [1, 2, 3],
                       "args": pd.Series(['{"x": 1}', None, '{"y": 2}'],
                                         dtype=pd.StringDtype("pyarrow", na_value=np.nan))})
    m = np.array([True, False, True])
    plain, text = base_frame(ev, m), base_frame(ev, m, text_args=True)
    assert plain["args"].tolist() == ['{"x": 1}', '{"y": 2}']
    assert opvec.arrow_text(text["args"]) and text["args"].tolist() == plain["args"].tolist()
    assert text["ts_ns"].tolist() == [0, 9] and text["end_ns"].tolist() == [1, 12]


def test_gemm_bytes_of_absurd_shapes_do_not_raise() -> None:
    # element counts past int64 (a hostile or corrupt trace): exact integers, no OverflowError
    from hermes.analyzers.common import opinfo

    big = 99_999_999_999
    s = pd.Series([f"[[{big}, {big}, {big}], [{big}, 7]]", "[[4, 8], [8, 2]]"])
    e = pd.Series([2.0, 2.0])
    want = [2.0 * (big ** 3 + big * 7 + big * big * 7), 2.0 * (32 + 16 + 8)]
    assert opinfo.gemm_bytes(s, e).tolist() == want
    assert opvec.gemm_bytes(s, e).tolist() == want


def test_gemm_bytes_matches_opinfo() -> None:
    from hermes.analyzers.common import opinfo
    rng = random.Random(7)
    raws: list = [None, "", "[[64, 128], [128, 32]]", "[[64, 128], [32, 128]]", "[[5], [5]]",
                  "[[2, 3, 4], [4, 6]]", "[[4, 6], [2, 6, 8]]", "[[], [3, 4]]", "[[3, 4]]",
                  "81920,4096;8192,512", "[[[1], [2]], [3]]", " [[1, 2], [2, 3]] "]
    # (dims past int64 make opinfo.gemm_bytes itself raise: not compared)
    raws += [json.dumps([[d for d in _shape(rng) if d < 2 ** 32]
                         for _ in range(rng.choice([1, 2, 2, 3]))]) for _ in range(2000)]
    s = pd.Series(raws * 2, dtype=object)
    el = pd.Series([rng.choice([2.0, 4.0, np.nan]) for _ in range(len(s))])
    want, got = opinfo.gemm_bytes(s, el), opvec.gemm_bytes(s, el)
    pd.testing.assert_series_equal(got, want)
    assert got.iloc[2] == (64 * 128 + 128 * 32 + 64 * 32) * el.iloc[2] or np.isnan(el.iloc[2])
    assert got.notna().sum() > 1000


def test_arg_keys_shared_lookups_match_plain_ones() -> None:
    from hermes.analyzers.common import opinfo
    rows = [json.dumps({"Group size": 8, "External id": i, "dtype": "BFloat16"}) for i in range(40)]
    rows += [json.dumps({"link": "RDMA", "wait_ns": 1500 + i, "peer": i % 3}) for i in range(40)]
    rows += [json.dumps({"name": "link", "group_size": "4"}), None, "not json", '{"link": 7',
             json.dumps({"aic_mte2_ratio": 0.5, "LINK": "hccs"})]
    args = pd.Series(rows * 3, dtype=object)
    ix = opinfo.ArgKeys(args)
    assert ix.codes is not None and len(ix.texts) < 12  # grouped: rows differ only in numbers
    for keys in [("Group size", "group_size"), ("link", "link_type"), ("wait_ns",), ("peer",),
                 ("aic_mte2_ratio",), ("missing",)]:
        want = opinfo.arg_values(args, *keys)
        pd.testing.assert_series_equal(opinfo.arg_values(args, *keys, index=ix), want)
        pd.testing.assert_series_equal(opinfo.arg_numbers(args, *keys, index=ix),
                                       opinfo.arg_numbers(args, *keys))
    assert opinfo.arg_numbers(args, "Group size", "group_size", index=ix).iloc[[0, 80]].tolist() \
        == [8.0, 4.0]
    assert opinfo.arg_values(args, "link", index=ix).iloc[40] == "RDMA"
    for dt in (pd.StringDtype("pyarrow"), pd.StringDtype("pyarrow", na_value=np.nan)):
        s = args.dropna().astype(dt)
        for pat in (opinfo.arg_pattern("link", "Group size"),
                    r'"Input Dims"\s*:\s*(\[\[.*?\]\])'):
            pd.testing.assert_series_equal(opinfo.extract(s, pat, flags=re.I),
                                           s.str.extract(pat, flags=re.I, expand=False))
        pd.testing.assert_series_equal(opinfo.arg_values(s, "link", index=opinfo.ArgKeys(s)),
                                       opinfo.arg_values(s, "link"))


def _host_ops(path) -> tuple[pd.Series, pd.Series]:
    import gzip
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        try:
            doc = json.load(fh)
        except ValueError:
            return pd.Series([], dtype=object), pd.Series([], dtype=object)
    evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    ops = [e for e in evs if isinstance(e, dict) and isinstance(e.get("args"), dict)
           and "Input Dims" in e["args"]]
    return (pd.Series([str(e.get("name")) for e in ops], dtype=object),
            pd.Series([json.dumps(e["args"]) for e in ops], dtype=object))


def test_shared_traces_operator_costs_match(shared_traces) -> None:
    """Every recorded operator of every shared Kineto trace: the same table both ways."""
    files = sorted(p for p in shared_traces.rglob("*") if p.name.endswith((".json", ".json.gz")))
    seen = 0
    for path in files:
        names, args = _host_ops(path)
        if len(names) == 0:
            continue
        seen += len(names)
        pd.testing.assert_frame_equal(opvec.op_costs(names, args),
                                      opcost.op_costs(names, args), obj=str(path))
    assert seen > 10000


def test_misaligned_matches_opinfo() -> None:
    from hermes.analyzers.common import opinfo
    rng = random.Random(3)
    raws: list = [None, "", "[[64, 128], [128, 32]]", "[[64, 120], [120, 32]]", "[[], [3, 7]]",
                  "81920,4096;8192,510", "[[[1], [2]], [3]]", " [[1, 2], [2, 3]] ", "[[8]]"]
    raws += [json.dumps([_shape(rng) for _ in range(rng.choice([1, 2, 3, 4]))])
             for _ in range(2000)]
    for n_in, align in ((2, 8), (3, 64), (2, 16)):
        want = np.array([opinfo.misaligned(r, n_in, align) for r in raws], bool)
        got = opvec.misaligned(np.array(raws, dtype=object), n_in, align)
        assert got.tolist() == want.tolist()
        assert 100 < got.sum() < len(raws) - 100


def test_parse_dims_reads_what_json_reads() -> None:
    items = np.array(["[[2, 3], [], [40]]", "", "[]", "[[7]]", "[ [ 1 ,2 ] ,[ 3 ] ]",
                      "[[123456789012345678, 0]]"], dtype=object)
    nin, rank, flat = opvec.parse_dims(items)
    assert nin.tolist() == [3, 0, 0, 1, 2, 1]
    assert rank.tolist() == [2, 0, 1, 1, 2, 1, 2]
    assert flat.tolist() == [2, 3, 40, 7, 1, 2, 3, 123456789012345678, 0]


def test_parse_dims_in_chunks_is_parse_dims_whole(monkeypatch) -> None:
    items = np.array(["[[2, 3], [4]]", "", "[[5]]", "[[], [7, 8, 9]]", "[[10, 11]]"],
                     dtype=object)
    whole = opvec.parse_dims(items)
    # by hand: inputs per item, rank per input, the integers in order
    assert whole[0].tolist() == [2, 0, 1, 2, 1]
    assert whole[1].tolist() == [2, 1, 1, 0, 3, 2]
    assert whole[2].tolist() == [2, 3, 4, 5, 7, 8, 9, 10, 11]
    monkeypatch.setattr(opvec, "PARSE_CHUNK", 2)  # three chunks, one of them ""
    for a, b in zip(whole, opvec.parse_dims(items), strict=True):
        assert a.tolist() == b.tolist()
