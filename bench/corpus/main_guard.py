# reprobot corpus: main_guard
# Exercises: everything under the `if __name__ == "__main__":` guard: imports, constants, a class
#   and the helpers are all defined inside it, a loop over job records, a try/except that re-raises
#   with context, and a run id read from a table of jobs.
# Expected failure: ValueError: badly formed hexadecimal UUID string
#   raised by `uuid.UUID(...)` in JobIndex.add
#   (line 43, marked FAILING LINE).
# Ideal result (2 statements):
#   import uuid
#   uuid.UUID('run-0042')
if __name__ == "__main__":
    import json
    import sys
    import uuid
    from dataclasses import dataclass

    JOBS = [
        {"id": "0d3c2a6e-6f0b-4f86-8a57-2f1d3b7c9e10", "name": "nightly", "tags": ["ci"]},
        {"id": "run-0042", "name": "adhoc", "tags": []},
        {"id": "5b1f4e0c-2a9d-4c3e-9b8f-7a6d5c4b3a21", "name": "weekly", "tags": ["ci", "slow"]},
    ]
    STRICT = True

    @dataclass
    class Job:
        key: uuid.UUID
        name: str
        tags: list

    def normalise(raw: str) -> str:
        text = raw.strip().lower()
        if text.startswith("urn:uuid:"):
            text = text[len("urn:uuid:"):]
        return text

    class JobIndex:
        def __init__(self, strict: bool) -> None:
            self.strict = strict
            self.jobs: dict = {}

        def add(self, record: dict) -> Job:
            text = normalise(record["id"])
            key = uuid.UUID(text)  # FAILING LINE: an ad-hoc run id, not a UUID
            job = Job(key, record["name"], list(record["tags"]))
            self.jobs[key] = job
            return job

        def by_tag(self, tag: str) -> list:
            return sorted(j.name for j in self.jobs.values() if tag in j.tags)

        def to_json(self) -> str:
            return json.dumps({str(k): v.name for k, v in self.jobs.items()}, indent=1)

    def load(index: JobIndex, records: list) -> int:
        added = 0
        for record in records:
            try:
                index.add(record)
            except ValueError:
                if index.strict:
                    raise
                continue
            added += 1
        return added

    def describe(job: Job) -> str:
        tags = ", ".join(job.tags) or "untagged"
        return f"{job.name} ({tags}) {job.key.hex[:8]}"

    def stale(index: JobIndex, names: list) -> list:
        known = {j.name for j in index.jobs.values()}
        return [n for n in names if n not in known]

    def report(index: JobIndex) -> None:
        for job in index.jobs.values():
            print(describe(job))
        print("stale", stale(index, ["nightly", "monthly"]))
        for tag in ("ci", "slow"):
            print(tag, index.by_tag(tag))
        print(index.to_json())

    index = JobIndex(STRICT)
    count = load(index, JOBS)
    print(f"loaded {count} jobs", file=sys.stderr)
    report(index)
