FROM page_view_stg pvs
INSERT OVERWRITE TABLE page_view PARTITION (dt='2008-06-08')
  SELECT pvs.viewTime, pvs.userid, pvs.page_url WHERE pvs.country = 'US'
INSERT INTO TABLE page_view_counts
  SELECT pvs.page_url, COUNT(*) GROUP BY pvs.page_url;
