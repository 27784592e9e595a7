"""The pass's object store (SeaweedFS inside the sandbox): its bucket, the secret that gives
pods its keys, the demo clips uploaded to it as a user would, and the stages' markers and
reports read back from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_BUCKET = "madbench"
_STORE = f"s3://{_BUCKET}/runs"
_SOURCES = f"s3://{_BUCKET}/sources"
_S3_SECRET = "madbench-s3"
_S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION")


def _upload_sources(s3: Any, csv_path: Path, every: int) -> int:
    """Every ``every``-th row of the CSV and its files into ``s3://madbench/sources/``."""
    import csv
    import io

    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))[::every]
    client = s3.client()
    buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if _BUCKET not in buckets:
        client.create_bucket(Bucket=_BUCKET)
    for row in rows:
        for col in ("path", "speech_stem", "env_stem"):
            if row.get(col):
                client.upload_file(str(csv_path.parent / row[col]), _BUCKET,
                                   f"sources/{row[col]}")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    client.put_object(Bucket=_BUCKET, Key="sources/sources.csv", Body=out.getvalue().encode())
    return len(rows)


def _markers(s3: Any, run_id: str, graph: Any) -> dict[str, dict[str, Any]]:
    from madbench_common.core.store import RunStore, S3Store
    from madbench_common.pipeline.stage import read_marker

    run = RunStore(S3Store(_STORE, client=s3.client()), run_id)
    out = {}
    for stage in graph:
        marker = read_marker(run, stage.name)
        if marker is not None:
            out[stage.name] = marker
    return out


def _print_reports(s3: Any, name: str, run_id: str, graph: Any, banner: str) -> None:
    from madbench_common.cli.pipeline import main_section, print_status, zero_shot_sections
    from madbench_common.core.store import RunStore, S3Store
    from madbench_common.pipeline.stage import read_marker
    from madbench_common.pipeline.status import collect_status

    run = RunStore(S3Store(_STORE, client=s3.client()), run_id)
    print(f"\n{'=' * 100}\n{banner}\n{'=' * 100}")
    os.environ.setdefault("COLUMNS", "160")  # rich: tables as wide as a terminal's
    print_status(collect_status(run, graph), table1=name != "deaf")
    stage = "deaf_report" if name == "deaf" else "evaluate"
    marker = read_marker(run, stage)
    if marker is None:
        print(f"({name}: {stage} has not finished; no report)")
        return
    text = run.get_bytes(f"{marker['prefix']}/report/report.md").decode()
    if name == "deaf":
        print("## " + text.split("\n## ", 1)[1].strip() if "\n## " in text else text)
    else:
        print(main_section(text))
        for section in text.split("\n## ")[2:]:
            if section.startswith(("Table 3", "Table 4", "Table 5")):
                print("\n## " + section.strip())
        for section in zero_shot_sections(text):
            print("\n" + section)
    print(f"\n{banner}\nreport: {run.uri(marker['prefix'] + '/report/report.md')}")
