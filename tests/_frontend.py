"""What plotly.js sends back to a FigureWidget after every restyle, emulated in Python.

After a restyle the widget's JavaScript view diffs each trace's full data against the data the
kernel sent and returns the difference (`_sendTraceDeltas` in plotly's widgetbundle.js). A
property that arrived as a numpy array lives in JavaScript as a typed array and comes back as
`{"dtype", "shape", "value"}`, a dict; plotly's Python side then recurses into the numpy array it
holds and raises `ValueError: The truth value of an array ... is ambiguous`. In a kernel that
error goes to JupyterLab's log console only; here it raises in the test.
"""

from __future__ import annotations

import numpy as np


def typed_array_echo(value):
    """The delta plotly.js returns for a property the kernel sent as `value` (None: no delta)."""
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.name, "shape": list(value.shape), "value": value.tobytes()}
    if isinstance(value, dict):
        echoed = {k: typed_array_echo(v) for k, v in value.items()}
        echoed = {k: v for k, v in echoed.items() if v is not None}
        return echoed or None
    return None  # plain lists and scalars compare equal in JavaScript: nothing comes back


def echo_trace_deltas(figure) -> None:
    """Deliver the trace deltas the browser would send after the last update of `figure`."""
    deltas = []
    for trace in figure.data:
        delta = {"uid": trace.uid}
        for name, value in trace._props.items():
            echoed = typed_array_echo(value)
            if echoed is not None:
                delta[name] = echoed
        deltas.append(delta)
    message = {"trace_deltas": deltas, "trace_edit_id": figure._last_trace_edit_id}
    figure._handler_js2py_traceDeltas({"new": message})
