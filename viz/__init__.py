"""Figures and HTML for the EAGLE explainer. Pure builders: trace records in, plotly Figures
or HTML strings out. Depends on eagle_core's trace dataclasses only, never on gradio."""
from .charts import acceptance_by_depth_figure, accepted_length_figure, timing_figure
from .probs import probs_figure, tested_nodes
from .style import empty_figure, token_label
from .text import colored_text_html, comparison_html, cycle_caption, replay_html, token_pieces
from .traces import bundle_from_json, bundle_to_json, check_run
from .tree import mask_figure, tree_figure, tree_graph, tree_layout

__all__ = [
    "acceptance_by_depth_figure", "accepted_length_figure", "bundle_from_json", "bundle_to_json",
    "check_run", "colored_text_html", "comparison_html", "cycle_caption", "empty_figure", "mask_figure",
    "probs_figure", "replay_html", "tested_nodes", "timing_figure", "token_label", "token_pieces", "tree_figure",
    "tree_graph", "tree_layout",
]
