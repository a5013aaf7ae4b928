insert into s.t select a from s.u;
insert into s.t select a from s.u;
insert into s.t select a from s.u;
insert into s.t select a from s.u;
insert into s.t select a from s.u;
