"""The domain: each module reads and writes one kind of thing with
SQLAlchemy Core, inside the transactions of ``placement.db.api``. No HTTP here."""
