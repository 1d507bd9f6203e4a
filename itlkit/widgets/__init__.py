"""ipywidgets wiring: controls that update plotly FigureWidgets in place.

The only layer that imports ipywidgets.
"""
