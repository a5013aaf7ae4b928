CREATE TABLE masteTable
(
  masterColumn      varchar(3) Primary Key,
);

CREATE TABLE foreignTable
(
  foreignColumn1      varchar(3) NOT NULL ,
  foreignColumn2      varchar(3) NOT NULL
  FOREIGN KEY (foreignColumn1) REFERENCES masteTable(masterColumn),
  FOREIGN KEY (foreignColumn2) REFERENCES masteTable(masterColumn)
)
