"""Every setting and view value of the explorer, declared once, and what is
derived from that declaration.

`ENTRIES` lists them all: the worked example, the sidebar's settings (each an
`AttentionConfig` field), the hand-entered matrices, and the view values (the
query token, the head, the explained cell, the line view, the overflow demo,
the CSV's step; on the Real model page the model, the folder and the layer; on
the Experiments page the open experiment and each experiment's parameters).
Each `Entry` has a kind (its type, how a link writes and reads it, its bounds,
read from `explorer.core.config`), a default (per page, or computed from the page's
trace), its URL name (the entry's name) and the pages it belongs to.
Everything else follows from it:

- the widgets (`explorer.ui.widgets.draw`) take their key, label, help,
  bounds and choices from an entry;
- a link is read once, on a session's first run, every parameter in one pass
  (`read_link`); values whose bounds need the trace (a query token below the
  token count, a head below n_heads, a cell inside its step) are bounded in one
  place, `resolve`, which also says when a link's value had to be dropped;
- the link is written from the state (`link_params`, `publish`): the worked
  example, then every value of the page that differs from its baseline, the
  example's value or else the page's default;
- what carries over between pages (`begin`): every entry keeps its value for
  the whole session, and a page reads only its own entries (`Entry.pages`);
- the downloads read the page's `View`: the CSV's head is the head shown.

`INTERNAL` declares the session keys that are not entries (the messages about
a link, a requested page switch ...), so that every key a session holds is
listed in this package, and `ACTIONS` the key prefixes of widgets that hold no
value (buttons, charts, tables, uploads); a test compares a session's widget
keys with both.

Why `begin` re-assigns the values of the widgets at the start of every run
(Streamlit 1.67, seen in AppTest and in Chromium): with a ``pages/`` folder a
widget's element id includes its page script's hash, so the shared sidebar's
widgets remount under new ids on every page switch, and
``persist_state="session"`` restores a remounted widget's value one run late:
the first run on the new page shows the defaults (a link's or a worked
example's values vanish on the first page switch). Re-assigning every declared
value before any widget is drawn is Streamlit's documented way to keep values
across pages. No widget gets ``value=`` (its value is in the session before it
is drawn), so Streamlit has nothing to warn about, and none is bound to the URL
(``bind=``): the link is written here, from the same values, in one place.

The package, each module importing only those above it:

- `kinds`: a value's type, its text in a link, and its bounds;
- `entries`: the declaration (`ENTRIES`, `ACTIONS`, the page sets);
- `session`: values, messages, internal keys (`INTERNAL`), worked examples;
- `link`: reading a link and writing it;
- `view`: a page's first call (`begin`), its settings and view values, its `View`.

`kinds` and `entries` import no streamlit. Callers use the package
(`from explorer.ui import state; state.value("seed")`).
"""

from explorer.ui.state.entries import (
                                     ACTIONS,
                                     ADVANCED,
                                     BASIC,
                                     CHART_PAGES,
                                     CONFIG_ENTRIES,
                                     CONFIG_PAGES,
                                     DIM_SCORES,
                                     DROPOUT_MAX,
                                     DROPOUT_STEP,
                                     ENTRIES,
                                     EXAMPLE,
                                     EXPERIMENT_LABELS,
                                     FOLDER,
                                     HEAD_PAGES,
                                     MATRICES,
                                     MATRIX,
                                     MAX_LINK_MATRIX_CHARS,
                                     ONLY,
                                     OUT_PROJ_CHOICES,
                                     OVERFLOW_FACTORS,
                                     OVERFLOW_PAGES,
                                     PAGE_OWN,
                                     SCALING_KEYS,
                                     TEMPERATURES,
                                     TRACE_PAGES,
                                     VIEW,
                                     WEIGHT_PAGES,
                                     Context,
                                     Entry,
                                     entries_of,
)
from explorer.ui.state.kinds import (
                                     CellRef,
                                     ChartCell,
                                     Choice,
                                     Flag,
                                     Fraction,
                                     Index,
                                     Kind,
                                     MatrixKind,
                                     Number,
                                     Pair,
                                     Steps,
                                     Text,
)
from explorer.ui.state.link import LINK_BOX_KEY, link_params, publish, read_link, show_problems, url
from explorer.ui.state.session import (
                                     CHART_SENT,
                                     EDITOR_VERSION,
                                     FOLLOW_PAUSE_SECONDS,
                                     IMPORT_ERROR,
                                     INTERNAL,
                                     LINK_CHECKS,
                                     LINK_READ,
                                     MODEL_EXAMPLE_FOUND,
                                     PAGE_FOLLOWS,
                                     PROBLEMS,
                                     SHOWN_CONFIG,
                                     SWITCH_TO,
                                     active_preset,
                                     apply_preset,
                                     as_array,
                                     changed,
                                     checked,
                                     dropped,
                                     follow_page,
                                     note,
                                     page_follows,
                                     page_will_follow,
                                     problems,
                                     put,
                                     request_switch,
                                     set_matrix,
                                     value,
)
from explorer.ui.state.view import View, baseline, begin, config_fields, resolve, settings

__all__ = [
    'Kind', 'Number', 'Text', 'Choice', 'Flag', 'Steps', 'Fraction', 'Index', 'CellRef',
    'Pair', 'ChartCell', 'MatrixKind', 'EXAMPLE', 'PAGE_OWN', 'BASIC', 'ADVANCED', 'MATRIX',
    'VIEW', 'Entry', 'CONFIG_PAGES', 'WEIGHT_PAGES', 'CHART_PAGES', 'TRACE_PAGES',
    'HEAD_PAGES', 'OVERFLOW_PAGES', 'ONLY', 'Context', 'OUT_PROJ_CHOICES', 'DROPOUT_MAX',
    'DROPOUT_STEP', 'FOLDER', 'EXPERIMENT_LABELS', 'TEMPERATURES', 'SCALING_KEYS',
    'DIM_SCORES', 'OVERFLOW_FACTORS', 'ENTRIES', 'CONFIG_ENTRIES', 'MATRICES',
    'MAX_LINK_MATRIX_CHARS', 'ACTIONS', 'entries_of', 'LINK_READ', 'LINK_CHECKS', 'PROBLEMS',
    'SWITCH_TO', 'PAGE_FOLLOWS', 'SHOWN_CONFIG', 'EDITOR_VERSION', 'IMPORT_ERROR',
    'CHART_SENT', 'MODEL_EXAMPLE_FOUND', 'INTERNAL', 'value', 'checked', 'put', 'problems', 'note', 'dropped',
    'changed', 'page_follows', 'page_will_follow', 'FOLLOW_PAUSE_SECONDS', 'follow_page', 'request_switch',
    'as_array', 'set_matrix', 'apply_preset', 'active_preset', 'LINK_BOX_KEY', 'read_link', 'link_params',
    'url', 'publish', 'show_problems', 'begin', 'baseline', 'settings', 'config_fields',
    'resolve', 'View'
]
