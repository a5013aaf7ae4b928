-- dialect: snowflake
-- CTEs, a union, QUALIFY, a lateral alias and a view with a column list.
create or replace view mart.customer_value (customer_id, lifetime_value, value_band) as
with payments as (
    select customer_id, amount from raw.card_payments
    union all
    select customer_id, amount from raw.bank_payments
), totals as (
    select customer_id, sum(amount) as total
    from payments
    group by customer_id
)
select t.customer_id,
       t.total as ltv,
       case when ltv > 1000 then 'high' else 'low' end as band
from totals t
join raw.customers c on c.id = t.customer_id
qualify row_number() over (partition by c.region order by t.total desc) <= 100;
