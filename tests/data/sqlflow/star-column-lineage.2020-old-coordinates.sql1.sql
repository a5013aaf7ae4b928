create view v as select * from t;
