SELECT EmployeeID, FirstName, LastName, ManagerID, EmpLevel  FROM Employees
