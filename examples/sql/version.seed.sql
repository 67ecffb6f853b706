INSERT INTO document (doc_id, version, body) VALUES ('d1', 1, 'first draft');
