"""Report rendering details: operator names readable in text/Markdown, whole in JSON."""

from __future__ import annotations

from hermes.report.common import short_name

KERNEL = ("void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
          "<c10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
          "at::RestrictPtrTraits, long>, float, long)")


def test_short_names_stay_whole():
    assert short_name("aten::mm") == "aten::mm"
    assert short_name("x" * 100) == "x" * 100


def test_long_signature_loses_return_type_templates_and_parameters():
    assert short_name(KERNEL) == ("split_embedding_backward_codegen_rowwise_adagrad_unweighted"
                                  "_kernel_cta_per_row_1<...>(...)")
    lam = ("void at::native::(anonymous namespace)::elementwise_kernel<128, 4, at::native::"
           "gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&)"
           "::{lambda(int)#1}>(int, at::native::CUDAFunctor_add<float> const&)")
    assert short_name(lam) == "at::native::(...)::elementwise_kernel<...>(...)"


def test_what_is_still_too_long_is_cut_with_an_ellipsis():
    s = short_name("k" * 150 + "<int>(float)", width=40)
    assert s == "k" * 37 + "..." and len(s) == 40


def test_shortened_kernel_names_never_read_the_same():
    from hermes.report.common import unique_short_names

    a = "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float>>" \
        "(int, at::native::AUnaryFunctor<float>, at::detail::Array<char*, 2>)" + " " * 40
    b = a.replace("AUnaryFunctor", "BinaryFunctor")
    short = unique_short_names([a, b, "nvjet_small", a], 60)
    assert short[0] != short[1]
    assert short[0].startswith("vectorized_elementwise_kernel<4, AUnaryFunctor")
    assert short[1].startswith("vectorized_elementwise_kernel<4, BinaryFunctor")
    assert short[2] == "nvjet_small"
    assert short[3] == short[0] + " #2"          # the same name twice stays told apart
    assert all(len(s) <= 63 for s in short)


def test_json_text_md_carry_mfu_and_top_kernels(tmp_path):
    """big_matmul (H100, 44 bf16 8192^3 GEMMs in 4 steps): the JSON's computation block, the
    text's MFU line and the Markdown's kernel table agree."""
    import json

    from tests.conftest import SHARED_TRACES

    src = SHARED_TRACES / "kineto-h100" / "big_matmul.pt.trace.json.gz"
    if not src.exists():
        import pytest

        pytest.skip("../shared/traces not present")
    from hermes.pipeline import analyze_and_advise
    from hermes.report import RENDERERS

    out = tmp_path / "t.parquet"
    from hermes.cli import main

    assert main(["import", str(src), "--out", str(out)]) in (0, None)
    a, adv = analyze_and_advise(out)
    d = json.loads(RENDERERS.get("json")(a, adv))
    rank = d["computation"]["per_rank"][0]
    # 11 GEMMs x 2 * 8192^3 FLOP per ~18.07 ms step: ~670 TFLOP/s of a 989.4 TFLOP/s peak
    assert 640 < rank["achieved_tflops"] < 700
    assert rank["mfu"] == pytest_approx(rank["achieved_tflops"] / rank["mfu_peak_tflops"])
    top = d["computation"]["top_kernels"][0]
    assert top["family"] == "gemm" and top["name"].startswith("nvjet_sm90")
    assert "MFU " in RENDERERS.get("text")(a, adv) and "TFLOP/s achieved" in \
        RENDERERS.get("text")(a, adv)
    assert "| nvjet_sm90" in RENDERERS.get("md")(a, adv)
    assert "memory" not in d                     # no memory samples in this trace


def pytest_approx(x):
    import pytest

    return pytest.approx(x, rel=1e-9)
