-- A statement whose text would end a <script> element if it were embedded raw.
CREATE TABLE db.s (a INT, c STRING);
INSERT INTO db.t
SELECT a, '</script><script>document.title="pwned"</script><!-- &  ' AS b
FROM db.s
WHERE c = '</SCRIPT >';
