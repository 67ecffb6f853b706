-- The dedup record: one row per business key. biz_key is the primary key and
-- the only unique key, because ON DUPLICATE KEY on a secondary unique index
-- takes next-key locks. Times come from the database clock.
CREATE TABLE IF NOT EXISTS `{{table}}` (
  biz_key       VARBINARY(255)  NOT NULL,
  request_hash  BINARY(32)      NOT NULL,
  status        TINYINT         NOT NULL DEFAULT 0 COMMENT '0 processing, 1 applied, 2 failed',
  response      MEDIUMTEXT      NULL,
  error         VARCHAR(1024)   NULL,
  attempts      INT UNSIGNED    NOT NULL DEFAULT 0,
  claim_token   BINARY(16)      NULL,
  owner         VARCHAR(128)    NULL,
  lease_until   DATETIME(6)     NULL,
  topic         VARCHAR(249)    NOT NULL,
  kpartition    INT             NOT NULL,
  koffset       BIGINT          NOT NULL,
  created_at    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expire_at     DATETIME(6)     NOT NULL,
  PRIMARY KEY (biz_key),
  KEY ix_expire_at (expire_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
