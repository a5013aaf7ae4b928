insert into s.a select x from s.b;
select [31m from from;
insert into s.c select y from s.b;
-- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low -- padding text to keep the share of control bytes low 
