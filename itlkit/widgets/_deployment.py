"""The deployment picker the notebooks share: model (a catalog name or your own config.json), GPU,
and the weight and KV-cache precisions. Where the notebook reads metrics, each dropdown also offers
AUTO: the part is then read off the metrics or assumed by `infer_deployment`, exactly as
`itlkit diagnose` does without the flag, and the notebook shows the same "assumed: ..." lines."""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from itlkit.diagnosis.deployment import Stated
from itlkit.physics.hardware import GPUS
from itlkit.physics.model_catalog import MODELS
from itlkit.physics.roofline import Deployment
from itlkit.units import KV_PRECISIONS, WEIGHT_PRECISIONS
from itlkit.widgets._style import labelled

AUTO = "auto (from the metrics)"  # the label of the option that leaves a part to the metrics
# its value: not None, which ipywidgets reads as "nothing selected" and shows as a blank box
AUTO_VALUE = "auto"


def stated_value(value):
    """A control's value as `Stated` takes it: None for AUTO."""
    return None if value == AUTO_VALUE else value


def auto_options(values) -> list:
    """Dropdown options with AUTO first."""
    return [(AUTO, AUTO_VALUE), *((str(v), v) for v in values)]


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

    def stated(self, **settings) -> Stated:
        """What the picker states, None for each part left to the metrics (AUTO)."""
        path = self.model_path.value.strip() if self.model_path is not None else ""
        return Stated(
            model=path or stated_value(self.model.value),
            gpu=stated_value(self.gpu.value),
            weight_precision=stated_value(self.weights.value) if self.weights else None,
            kv_precision=stated_value(self.kv.value) if self.kv else None,
            **{k: stated_value(v) for k, v in settings.items()},
        )

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
    auto: bool = False,
    width: str = "400px",  # as widgets._style.CONTROL_WIDTH: two columns fit at 1,280 px
    label_width: str = "150px",
) -> DeploymentPicker:
    """Dropdowns for the catalog model and GPU, a text box for your own config.json
    (`own_config`) and dropdowns for the weight and KV-cache precisions (`precisions`). With
    `auto`, each dropdown starts at AUTO (AUTO_VALUE): read off the metrics or assumed."""
    look = dict(width=width, label_width=label_width)
    # a precision name is short: its dropdown is 150 px beside the label (AUTO needs the width)
    short = f"{int(label_width.removesuffix('px')) + 150}px"
    narrow = look if auto else dict(width=short, label_width=label_width)
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

    def dropdown(label, names, value, **layout):
        options = auto_options(names) if auto else list(names)
        return labelled(widgets.Dropdown, label, options=options,
                        value=AUTO_VALUE if auto else value, **layout)  # fmt: skip

    weights = kv = None
    if precisions:
        weights = dropdown("weights", WEIGHT_PRECISIONS, weight_precision, **narrow)
        kv = dropdown("KV cache", KV_PRECISIONS, kv_precision, **narrow)
    return DeploymentPicker(
        model=dropdown("model", list(MODELS), model, **look),
        model_path=model_path,
        gpu=dropdown("GPU", list(GPUS), gpu, **look),
        weights=weights,
        kv=kv,
    )
