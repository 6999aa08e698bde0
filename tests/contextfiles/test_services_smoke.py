from qualification.contextfiles import selectors, services
from tests.contextfiles.conftest import table_tasks, trials_csv


def test_smoke(imported, evaluation, members):
    check = selectors.latest_drift_check(revision=imported.revision)
    assert check.finished_at is not None
    print(check.counts, check.job.status, check.job.error)
    csv = trials_csv(table_tasks(40, 10, 4, 6), arms=("full", "rules-only"))
    result = services.trials_record(evaluation=evaluation, data=csv, actor=members["editor"])
    print(result)
    results = selectors.evaluation_results(evaluation=evaluation)
    import json
    print(json.dumps(results.to_dict(), indent=1, default=str)[:3000])
