"""Optuna's storage for the searches: an RDB storage (SQLite file or PostgreSQL) with heartbeats
and a retry callback for trials whose worker died, its schema created under a lock so that
workers opening a fresh database at once do not race, and one-line errors for a bad URL or an
unwritable place."""
from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

from grpo_research.errors import UsageError


def retry_callback(max_retry: int):
    import optuna.storages as st

    cls = getattr(st, "RetryHeartbeatStaleTrialCallback", None) or st.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(max_retry=max_retry)


def make_storage(url: str, heartbeat_interval: int = 60, grace_period: int = 180, max_retry: int = 2):
    """RDBStorage with heartbeats and a retry callback for trials whose worker died."""
    import optuna
    import optuna.storages as st

    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UsageError(f"--storage {url}: cannot create {Path(path).parent} ({e.strerror})") from None
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    callback = retry_callback(max_retry)
    kwargs = {"heartbeat_interval": heartbeat_interval, "grace_period": grace_period}
    import inspect

    params = inspect.signature(st.RDBStorage).parameters
    key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
    import sqlalchemy
    import sqlalchemy.exc

    try:
        shown = sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        raise UsageError(f"--storage {url!r}: not a database URL (e.g. sqlite:///results/hpo/optuna.db or "
                         "postgresql+psycopg2://user@host/db)") from None
    try:
        with warnings.catch_warnings(), _schema_lock(url, engine_kwargs):
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return st.RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs, **{key: callback})
    except (sqlalchemy.exc.SQLAlchemyError, ImportError) as e:
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
        raise UsageError(f"--storage {shown}: cannot open the Optuna storage ({reason})") from None
    except OSError as e:  # an SQLite file's lock file (beside it): a read-only or full directory, say
        reason = (e.strerror or str(e)).lower()
        raise UsageError(f"--storage {shown}: cannot write {e.filename or 'beside the database file'} ({reason}); "
                         "give a storage in a writable directory") from None


SCHEMA_LOCK_KEY = 0x6772706F  # pg_advisory_lock key of Optuna's schema creation ("grpo")
SCHEMA_LOCK_WAIT_S = 300  # an SQLite storage's lock file: how long a worker waits for another's schema creation


@contextlib.contextmanager
def _schema_lock(url: str, engine_kwargs: dict):
    """Hold a lock while Optuna creates its schema: workers opening a fresh database at once
    otherwise race on it (PostgreSQL: UniqueViolation on `CREATE TYPE`; SQLite: "table ...
    already exists"). PostgreSQL: a session advisory lock; an SQLite file: a lock file beside it
    (grpo_research.locks); other databases: none."""
    if url.startswith("sqlite:///") and url[len("sqlite:///"):] not in ("", ":memory:"):
        from grpo_research.locks import DirLock

        with DirLock(url[len("sqlite:///"):] + ".lock", f"Optuna storage {url}", wait_s=SCHEMA_LOCK_WAIT_S):
            yield
        return
    if not url.startswith("postgresql"):
        yield
        return
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, **engine_kwargs)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK_KEY})
    finally:
        engine.dispose()
