"""The run's first call's agent position, so that the analysis of behaviour after
compaction reads each call's step since the compaction (`agent_index` minus it, plus 1)
in SQL instead of streaming every call to Python; the (agent, agent_index) index of calls
covers the facts it groups, so that it reads them index-only. Existing runs are filled here, set-based,
from their first call; a run left null (none should be) is read from its call at query
time."""

from django.db import migrations, models

FILL_SQL = """
UPDATE traces_run SET first_agent_index = (
    SELECT min(c.agent_index) FROM traces_call c
    WHERE c.session_id = traces_run.session_id AND c.session_index = traces_run.first_call_index
      AND c.agent_id = traces_run.agent_id
)
WHERE first_agent_index IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0014_call_cost_inputs"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="first_agent_index",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="The agent_index of the run's first call: a call's step in the run "
                "is its agent_index minus this, plus 1 (the run's calls are consecutive in its "
                "agent). Set at derive time; null on a run stored before it was (read from the "
                "call instead).",
                null=True,
            ),
        ),
        # The (agent, agent_index) index, covering the facts that analysis groups.
        migrations.RemoveIndex(model_name="call", name="traces_call_agent_i_d129a7_idx"),
        migrations.AddIndex(
            model_name="call",
            index=models.Index(
                fields=[
                    "agent",
                    "agent_index",
                    "id",
                    "session_index",
                    "prompt_kind",
                    "tool_results",
                    "tool_errors",
                ],
                name="call_agent_position_facts",
            ),
        ),
        migrations.RunSQL(FILL_SQL, reverse_sql=migrations.RunSQL.noop, elidable=True),
    ]
