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
