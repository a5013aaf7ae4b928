CREATE VIEW dbo.hiredate_view(FirstName,LastName)  
AS   
SELECT p.FirstName, p.LastName
from Person.Person AS p 
GO 

update dbo.hiredate_view h
set  h.FirstName =  p.FirstName
from h join Person.Person p 
on h.id = p.id;

insert into  dbo.hiredate_view (FirstName,LastName)   
SELECT p.FirstName, p.LastName
from Person.Person AS p ;
