select
    c.customer_id,
    c.full_name,
    sum(o.amount) as total_amount,
    count(o.order_id) as order_count
from {{ ref('stg_customers') }} as c
join {{ ref('stg_orders') }} as o on o.customer_id = c.customer_id
group by c.customer_id, c.full_name
