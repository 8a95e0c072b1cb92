"""Example inputs: every dtype and fill, seeded, resized; dynamic axes for both exporters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import DTYPES, DimSpec, InputSpec, OutputSpec, Recipe
from onnx_studio.engine.source.device import check_device
from onnx_studio.engine.source.inputs import (
    dynamic_axes,
    dynamic_shapes,
    input_shapes,
    make_inputs,
)
from onnx_studio.engine.source.trace_sizes import trace_size_warning, trace_sizes


def _recipe(*inputs: InputSpec, outputs: tuple[OutputSpec, ...] = (), base: Path | None = None,
            seed: int = 0) -> Recipe:
    recipe = Recipe(inputs=list(inputs), outputs=list(outputs), base_dir=base or Path.cwd())
    recipe.export.seed = seed
    return recipe


def _error(recipe: Recipe, **kwargs: object) -> StudioError:
    with pytest.raises(StudioError) as info:
        make_inputs(recipe, **kwargs)  # type: ignore[arg-type]
    assert info.value.kind == "inputs"
    assert "\n" not in info.value.message
    return info.value


# ---------------------------------------------------------------------------- dtypes and fills


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_with_its_default_fill(dtype: str) -> None:
    (tensor,) = make_inputs(_recipe(InputSpec("x", [2, 3], dtype, "randn")))
    assert tensor.dtype == getattr(torch, dtype)
    assert tensor.shape == (2, 3)


def test_randn_is_standard_normal() -> None:
    (x,) = make_inputs(_recipe(InputSpec("x", [20000], "float32", "randn")))
    assert abs(x.mean().item()) < 0.05 and abs(x.std().item() - 1) < 0.05


def test_rand_respects_low_and_high() -> None:
    (x,) = make_inputs(_recipe(InputSpec("x", [1000], "float64", "rand", low=-3, high=-2)))
    assert x.min() >= -3 and x.max() < -2 and x.max() - x.min() > 0.9


def test_randint_respects_bounds_for_every_integer_dtype() -> None:
    for dtype in ("int8", "int16", "int32", "int64", "uint8"):
        (x,) = make_inputs(_recipe(InputSpec("x", [500], dtype, "randint", low=3, high=7)))
        assert x.dtype == getattr(torch, dtype)
        assert set(x.tolist()) == {3, 4, 5, 6}


def test_randn_on_integers_draws_like_randint() -> None:
    (x,) = make_inputs(_recipe(InputSpec("x", [500], "int64", "randn")))
    assert x.dtype == torch.int64 and x.min() >= 0 and x.max() <= 9 and len(set(x.tolist())) > 5


def test_random_bools_have_both_values() -> None:
    (x,) = make_inputs(_recipe(InputSpec("x", [200], "bool", "rand")))
    assert x.dtype == torch.bool and 0 < x.sum() < 200


def test_constant_fills() -> None:
    zeros, ones, full, flag = make_inputs(_recipe(
        InputSpec("a", [2], "float16", "zeros"),
        InputSpec("b", [2, 2], "int32", "ones"),
        InputSpec("c", [3], "int64", "full", value=5),
        InputSpec("d", [1], "bool", "full", value=1),
    ))
    assert zeros.dtype == torch.float16 and not zeros.any()
    assert ones.dtype == torch.int32 and (ones == 1).all()
    assert full.tolist() == [5, 5, 5]
    assert flag.tolist() == [True]


def test_scalars() -> None:
    count, rate = make_inputs(_recipe(
        InputSpec("count", [], "int64", "full", value=9),
        InputSpec("rate", [], "float32", "randn"),
    ))
    assert count.shape == () and count.item() == 9
    assert rate.shape == () and rate.dtype == torch.float32


def test_complex_and_float8() -> None:
    c, f8 = make_inputs(_recipe(
        InputSpec("c", [4], "complex64", "randn"),
        InputSpec("f", [4], "float8_e4m3fn", "rand"),
    ))
    assert c.dtype == torch.complex64 and c.imag.abs().sum() > 0
    assert f8.dtype == torch.float8_e4m3fn


# ---------------------------------------------------------------------------- seeds


def _two_inputs(seed: int = 0) -> Recipe:
    return _recipe(InputSpec("x", [3, 4], "float32", "randn"),
                   InputSpec("y", [5], "int64", "randint", low=0, high=100), seed=seed)


def test_same_seed_same_tensors_independent_of_global_rng() -> None:
    torch.manual_seed(1)
    first = make_inputs(_two_inputs())
    state = torch.get_rng_state()
    torch.manual_seed(12345)
    second = make_inputs(_two_inputs())
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    torch.manual_seed(1)
    make_inputs(_two_inputs())
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG was not advanced


def test_seed_argument_overrides_the_recipe_seed() -> None:
    base = make_inputs(_two_inputs(seed=0))
    assert not torch.equal(make_inputs(_two_inputs(seed=0), seed=1)[0], base[0])
    assert torch.equal(make_inputs(_two_inputs(seed=7))[0], make_inputs(_two_inputs(), seed=7)[0])


# ---------------------------------------------------------------------------- sizes


def _batched() -> Recipe:
    return _recipe(
        InputSpec("x", [2, 3, 8], "float32", "randn", dynamic={0: "batch", -1: "length"}),
        InputSpec("mask", [2, 8], "bool", "ones", dynamic={0: "batch", 1: "length"}),
        InputSpec("scale", [1], "float32", "full", value=2.0),
    )


def test_sizes_override_named_dims_on_every_input() -> None:
    x, mask, scale = make_inputs(_batched(), sizes={"batch": 5, "length": 11})
    assert x.shape == (5, 3, 11) and mask.shape == (5, 11) and scale.shape == (1,)
    assert input_shapes(_batched(), {"batch": 4}) == [[4, 3, 8], [4, 8], [1]]


def test_unknown_size_name() -> None:
    err = _error(_batched(), sizes={"batc": 3})
    assert "'batc'" in err.message and "batch" in err.message


def test_shared_name_with_different_example_sizes() -> None:
    recipe = _recipe(InputSpec("a", [2, 3], dynamic={0: "batch"}),
                     InputSpec("b", [4, 3], dynamic={0: "batch"}))
    err = _error(recipe)
    assert "'batch'" in err.message and "a axis 0 is 2" in err.message and "b axis 0 is 4" \
        in err.message


def test_dynamic_axis_beyond_rank() -> None:
    err = _error(_recipe(InputSpec("a", [2], dynamic={3: "batch"})))
    assert "beyond its rank" in err.message


# ---------------------------------------------------------------------------- files


def test_npy_file_gives_shape_and_is_cast(tmp_path: Path) -> None:
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.save(tmp_path / "x.npy", data)
    (x,) = make_inputs(_recipe(InputSpec("x", [], "float32", "file", file="x.npy"),
                               base=tmp_path))
    assert x.dtype == torch.float32 and x.shape == (2, 3)
    assert x.tolist() == data.tolist()


def test_pt_file(tmp_path: Path) -> None:
    saved = torch.arange(4, dtype=torch.int64)
    torch.save(saved, tmp_path / "ids.pt")
    (ids,) = make_inputs(_recipe(InputSpec("ids", [4], "int64", "file", file="ids.pt"),
                                 base=tmp_path))
    assert torch.equal(ids, saved)


def test_file_errors(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    torch.save({"a": torch.zeros(1)}, tmp_path / "d.pt")
    (tmp_path / "x.csv").write_text("1,2\n")
    missing = _error(_recipe(InputSpec("x", [], fill="file", file="gone.npy"), base=tmp_path))
    assert "gone.npy" in missing.message and "does not exist" in missing.message
    shape = _error(_recipe(InputSpec("x", [4, 3], fill="file", file="x.npy"), base=tmp_path))
    assert "[2, 3]" in shape.message and "[4, 3]" in shape.message
    assert "not a tensor" in _error(_recipe(InputSpec("x", [], fill="file", file="d.pt"),
                                            base=tmp_path)).message
    assert "neither .npy nor .pt" in _error(
        _recipe(InputSpec("x", [], fill="file", file="x.csv"), base=tmp_path)).message
    resize = _error(_recipe(InputSpec("x", [], fill="file", file="x.npy", dynamic={0: "batch"}),
                            base=tmp_path), sizes={"batch": 5})
    assert "cannot be resized" in resize.message


def test_object_npy_is_not_unpickled(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    err = _error(_recipe(InputSpec("x", [], fill="file", file="o.npy"), base=tmp_path))
    assert "o.npy" in err.message


# ---------------------------------------------------------------------------- bad values


def test_bad_fill_values() -> None:
    frac = _error(_recipe(InputSpec("n", [2], "int64", "full", value=2.5)))
    assert "2.5" in frac.message and "whole number" in frac.message
    wide = _error(_recipe(InputSpec("n", [2], "uint8", "randint", low=0, high=300)))
    assert "0 to 255" in wide.message
    big = _error(_recipe(InputSpec("n", [2], "int8", "full", value=1000)))
    assert "does not fit" in big.message
    assert "below high" in _error(_recipe(InputSpec("n", [2], "float32", "rand", low=2,
                                                    high=1))).message
    assert "not a dtype" in _error(_recipe(InputSpec("n", [2], "float33"))).message
    assert "unknown" in _error(_recipe(InputSpec("n", [2], "float32", "gauss"))).message
    assert "needs a value" in _error(_recipe(InputSpec("n", [2], "float32", "full"))).message


def test_devices_absent_here() -> None:
    check_device("cpu")
    if not torch.cuda.is_available():
        for device in ("cuda", "cuda:1"):
            with pytest.raises(StudioError) as info:
                check_device(device)
            assert info.value.kind == "inputs"
            assert info.value.message == ('CUDA is not available on this machine; '
                                          'set device = "cpu".')
        err = _error(_two_inputs(), device="cuda")
        assert "CUDA" in err.message
    if not torch.backends.mps.is_available():
        with pytest.raises(StudioError, match="MPS"):
            check_device("mps")
    with pytest.raises(StudioError, match="not a device"):
        check_device("tpu")


# ---------------------------------------------------------------------------- dynamic axes


def test_dynamic_shapes_share_one_dim_per_name() -> None:
    shapes = dynamic_shapes(_batched())
    assert shapes is not None and len(shapes) == 3
    x_dims, mask_dims, scale_dims = shapes
    assert x_dims is not None and mask_dims is not None and scale_dims is None
    assert set(x_dims) == {0, 2}  # -1 normalised against the rank
    assert x_dims[0] is mask_dims[0] and x_dims[2] is mask_dims[1]
    assert x_dims[0].__name__ == "batch" and x_dims[2].__name__ == "length"
    assert dynamic_shapes(_recipe(InputSpec("a", [2]))) is None


def test_dynamic_axes_for_inputs_and_outputs() -> None:
    recipe = _batched()
    recipe.outputs = [OutputSpec("y", {0: "batch"}), OutputSpec("z")]
    assert dynamic_axes(recipe) == {
        "x": {0: "batch", 2: "length"}, "mask": {0: "batch", 1: "length"}, "y": {0: "batch"},
    }
    assert dynamic_axes(_recipe(InputSpec("a", [2]))) is None


def test_a_dynamic_size_of_0_or_1_is_traced_at_2_or_its_min() -> None:
    for size in (0, 1):
        recipe = _recipe(InputSpec("a", [size, 2], dynamic={0: "batch", 1: "n"}))
        assert trace_sizes(recipe) == {"batch": 2}
        warned = trace_size_warning(recipe, trace_sizes(recipe))
        assert f"'batch' at 2 (the example has {size})" in warned
    assert trace_sizes(_recipe(InputSpec("a", [3, 2], dynamic={0: "batch"}))) == {}
    recipe = _recipe(InputSpec("a", [1, 2], dynamic={0: "batch"}))
    recipe.dims["batch"] = DimSpec(min=1, max=1)  # the user asked for 1: honoured
    assert trace_sizes(recipe) == {}
    recipe.dims["batch"] = DimSpec(min=4)  # the example is outside, but min wins over 2
    assert trace_sizes(recipe) == {"batch": 4}
    from_file = _recipe(InputSpec("a", [1, 2], dynamic={0: "batch"}, fill="file", file="a.npy"))
    assert trace_sizes(from_file) == {}  # a file's size cannot be drawn again


class _AddAndSum(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2 + y, x.sum(1)


def _dims(value: onnx.ValueInfoProto) -> list[object]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_recipe_dim_names_reach_the_onnx_file_even_from_size_one(tmp_path: Path,
                                                                 exporter: str) -> None:
    """The recipe's names (not s0, s17...) label the ONNX axes; an example size of 1 does not
    freeze the axis (torch.onnx captures with backed_size_oblivious)."""
    recipe = _recipe(InputSpec("x", [1, 3], dynamic={0: "batch"}),
                     InputSpec("y", [1, 3], dynamic={0: "batch"}),
                     outputs=(OutputSpec("o", {0: "batch"}), OutputSpec("s", {0: "batch"})))
    path = tmp_path / "m.onnx"
    kwargs: dict[str, object] = (
        {"dynamic_shapes": dynamic_shapes(recipe)} if exporter == "dynamo"
        else {"dynamic_axes": dynamic_axes(recipe)})
    torch.onnx.export(_AddAndSum().eval(), make_inputs(recipe), str(path),
                      dynamo=exporter == "dynamo", input_names=["x", "y"],
                      output_names=["o", "s"], **kwargs)  # type: ignore[arg-type]
    graph = onnx.load(str(path)).graph
    assert [_dims(v) for v in graph.input] == [["batch", 3], ["batch", 3]]
    assert [_dims(v) for v in graph.output] == [["batch", 3], ["batch"]]
    x, y = make_inputs(recipe, sizes={"batch": 4}, seed=3)
    got = ort.InferenceSession(str(path)).run(None, {"x": x.numpy(), "y": y.numpy()})
    want = _AddAndSum()(x, y)
    assert got[0].shape == (4, 3)
    assert np.allclose(got[0], want[0].numpy()) and np.allclose(got[1], want[1].numpy())
