// The Scala job of this folder's logs, run through PySpark's own spark-shell (see make_logs.py --scala).
import spark.implicits._
spark.sql("CREATE TABLE sales (id BIGINT, region STRING, amount DOUBLE) USING parquet")
Seq((1L, "north", 10.0), (2L, "south", 25.0), (3L, "north", 40.0)).toDF("id", "region", "amount")
  .write.mode("append").insertInto("sales")
spark.table("sales").where($"amount" > 15).groupBy($"region").agg(sum($"amount").as("total"))
  .write.saveAsTable("region_totals")
spark.sql("CREATE TABLE big_sales USING parquet AS SELECT id, upper(region) AS region FROM sales WHERE amount > 20")
System.exit(0)
