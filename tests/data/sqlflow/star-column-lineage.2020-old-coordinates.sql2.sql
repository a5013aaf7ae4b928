create view v as select * from t where column1 + column2 > 0;
