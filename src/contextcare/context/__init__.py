"""Context care: how heavy a conversation has become and what to do about it.

* :mod:`.grades` - fatigue and wakefulness of a request, as figures and grades;
* :mod:`.meters` - token meters (a CJK-aware heuristic, or any ``message -> int`` callable);
* :mod:`.planner` - which span of a conversation to summarise or clear, checked;
* :mod:`.mindmap` - the map the model reads to clear spans itself, and its reminders.

These modules import only each other and :mod:`contextcare.errors` / :mod:`contextcare.marker`
(never the detector); import them by their full path, e.g. ``from contextcare.context.grades
import measure``.
"""
