"""The deployment picker the notebooks share: model (a catalog name or your own config.json), GPU,
and the weight and KV-cache precisions."""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from itlkit.physics.hardware import GPUS
from itlkit.physics.model_catalog import MODELS
from itlkit.physics.roofline import Deployment
from itlkit.units import KV_PRECISIONS, WEIGHT_PRECISIONS
from itlkit.widgets._style import labelled


@dataclass(frozen=True)
class DeploymentPicker:
    """The controls; `model_path` and the precisions are None when the picker leaves them out."""

    model: widgets.Dropdown
    model_path: widgets.Text | None
    gpu: widgets.Dropdown
    weights: widgets.Dropdown | None
    kv: widgets.Dropdown | None

    @property
    def controls(self) -> list[widgets.Widget]:
        """The controls present, in display order."""
        every = (self.model, self.model_path, self.gpu, self.weights, self.kv)
        return [c for c in every if c is not None]

    @property
    def model_name(self) -> str:
        """The config.json path when one is typed, else the catalog name."""
        path = self.model_path.value.strip() if self.model_path is not None else ""
        return path or self.model.value

    def deployment(self, **settings) -> Deployment:
        """`Deployment.create` with the picked model, GPU and precisions, and `settings`."""
        picked = {}
        if self.weights is not None:
            picked["weight_precision"] = self.weights.value
        if self.kv is not None:
            picked["kv_precision"] = self.kv.value
        return Deployment.create(model=self.model_name, gpu=self.gpu.value, **picked, **settings)


def deployment_picker(
    *,
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    weight_precision: str = "bf16",
    kv_precision: str = "bf16",
    own_config: bool = True,
    precisions: bool = True,
    width: str = "460px",
    label_width: str = "150px",
) -> DeploymentPicker:
    """Dropdowns for the catalog model and GPU, a text box for your own config.json
    (`own_config`) and dropdowns for the weight and KV-cache precisions (`precisions`)."""
    look = dict(width=width, label_width=label_width)
    # a precision name is short: its dropdown is 150 px beside the label
    narrow = dict(width=f"{int(label_width.removesuffix('px')) + 150}px", label_width=label_width)
    model_path = None
    if own_config:
        model_path = labelled(
            widgets.Text,
            "own config.json",
            value="",
            placeholder="path/to/config.json (overrides the model above)",
            continuous_update=False,
            **look,
        )
    weights = kv = None
    if precisions:
        weights = labelled(
            widgets.Dropdown, "weights", options=WEIGHT_PRECISIONS, value=weight_precision, **narrow
        )
        kv = labelled(
            widgets.Dropdown, "KV cache", options=KV_PRECISIONS, value=kv_precision, **narrow
        )
    return DeploymentPicker(
        model=labelled(widgets.Dropdown, "model", options=list(MODELS), value=model, **look),
        model_path=model_path,
        gpu=labelled(widgets.Dropdown, "GPU", options=list(GPUS), value=gpu, **look),
        weights=weights,
        kv=kv,
    )
