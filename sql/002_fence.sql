-- External mode (docs/GUARANTEES.md, "External effects"): the fencing token
-- of the row's claim, raised by every takeover, so a worker whose claim was
-- taken over finishes nothing. 0 on rows written in local mode. Added last,
-- with a default, so the server adds it without copying the table.
ALTER TABLE `{{table}}` ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
